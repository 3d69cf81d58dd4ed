#!/usr/bin/env python3
"""Peer for the GPU bench: what a JAX user does instead of devtap, measured on the same GPU.

A jitted `lax.fori_loop` on the GPU hands a 16-byte value (four float32) to the host on every step,
through `jax.experimental.io_callback` (ordered) and through `jax.debug.callback`; the host side
counts them and checks each value. Prints callbacks per second and writes them to --csv. Exits 77
when JAX or a JAX GPU backend is missing (the GPU check then reports SKIP, not PASS).

    python3 bench/cuda/jax_peer.py [--steps N] [--csv FILE]
"""
import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--csv", default="")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps wants a positive count")
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.experimental import io_callback
    except ImportError as e:
        print(f"jax_peer: JAX is not importable ({e}): skipped")
        return 77
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError as e:
        print(f"jax_peer: no JAX GPU backend ({e}): skipped")
        return 77

    seen = {"n": 0, "bad": 0}

    def on_host(step, value):
        seen["bad"] += int(not np.allclose(np.asarray(value), float(step)))
        seen["n"] += 1
        return np.int32(0)

    def with_io_callback(n):
        def body(i, acc):
            v = jnp.full((4,), i, dtype=jnp.float32)
            return acc + io_callback(on_host, jax.ShapeDtypeStruct((), jnp.int32), i, v, ordered=True)
        return jax.lax.fori_loop(0, n, body, jnp.int32(0))

    def with_debug_callback(n):
        def body(i, acc):
            jax.debug.callback(on_host, i, jnp.full((4,), i, dtype=jnp.float32))
            return acc + 1
        return jax.lax.fori_loop(0, n, body, jnp.int32(0))

    rows = []
    with jax.default_device(gpu):
        for name, fn in (("jax io_callback (ordered)", with_io_callback), ("jax.debug.callback", with_debug_callback)):
            f = jax.jit(fn, static_argnums=0)
            jax.block_until_ready(f(10))  # compile and warm up
            jax.effects_barrier()
            seen["n"] = seen["bad"] = 0
            t0 = time.perf_counter()
            jax.block_until_ready(f(args.steps))
            jax.effects_barrier()
            dt = time.perf_counter() - t0
            rate = seen["n"] / dt if dt > 0 else 0.0
            print(f"{name:28s} {seen['n']:8d} callbacks in {dt:8.3f} s: {rate:12.0f}/s, {seen['bad']} wrong")
            rows.append((name, seen["n"], dt, rate))
            if seen["n"] != args.steps or seen["bad"]:
                print(f"jax_peer: {name}: expected {args.steps} correct callbacks")
                return 1
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("section,method,size_bytes,records,seconds,per_second,device,note\n")
            for name, n, dt, rate in rows:
                f.write(f"peer,{name},16,{n},{dt:.6f},{rate:.6g},{gpu.device_kind},jitted fori_loop on the GPU\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
