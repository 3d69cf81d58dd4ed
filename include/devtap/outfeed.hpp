#pragma once
/** The former name of <devtap/receiver.hpp>, kept so existing includes keep compiling. */
#include <devtap/receiver.hpp>
