#pragma once
/** Backends: the policy concept, the registry, the cpu and cuda backends, the default registry. */
#include <devtap/backend/cpu.hpp>
#include <devtap/backend/cuda.hpp>
#include <devtap/backend/default.hpp>
#include <devtap/backend/device.hpp>
#include <devtap/backend/policy.hpp>
#include <devtap/backend/process.hpp>
#include <devtap/backend/registry.hpp>
