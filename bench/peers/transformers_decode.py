#!/usr/bin/env python3
"""Decode step time of Hugging Face transformers on a tpserve checkpoint: the peer of bench/tp_decode.

For each concurrency c (a batch of c sequences of --input-len random token ids, seeded), the script prefills
once, then times --steps greedy decode steps (after --warmup untimed ones) with torch.cuda.synchronize()
around each step: one step = one forward of c new tokens + argmax, as a tp_decode decode step. It reports
the median, p10 and p90 of the step time and writes JSON.

Experts backends (transformers 5 `experts_implementation`): every candidate in --experts is measured at
every c and the fastest median is the headline, all candidates are kept in the JSON. The default measures
`batched_mm` (what transformers' own generate() switches to at decode on GPU; graph-capturable) and
`grouped_mm` (torch grouped GEMM; not capturable in CUDA graphs). Prefill always runs with grouped_mm where
it exists (batched_mm would copy every expert's weights per prefill token).

Execution per candidate, first that works: static KV cache + torch.compile (mode: reduce-overhead, i.e.
CUDA graphs, for batched_mm; default, i.e. no graphs, for grouped_mm; --compile-mode overrides), then static
cache eager, then dynamic cache eager. The JSON and the table say which ran and why the others failed.

    python3 bench/peers/transformers_decode.py --model /dev/shm/qwen3-30b-a3b --concurrency 1,16 \
        --input-len 128 --steps 64 --json peer.json

Needs torch (2.9+ for grouped_mm) and transformers 5.x with a CUDA GPU.
"""

import argparse
import json
import math
import os
import platform
import socket
import sys
import time
import traceback

DEFAULT_COMPILE_MODES = {"batched_mm": "reduce-overhead", "grouped_mm": "default", "eager": "default"}


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default), as bench/common/sample_stats."""
    if not values:
        return float("nan")
    s = sorted(values)
    rank = q / 100.0 * (len(s) - 1)
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (rank - lo) * (s[hi] - s[lo])


def distribution(values):
    return {
        "count": len(values),
        "median": percentile(values, 50),
        "p10": percentile(values, 10),
        "p90": percentile(values, 90),
        "min": min(values) if values else float("nan"),
        "max": max(values) if values else float("nan"),
        "mean": sum(values) / len(values) if values else float("nan"),
    }


def without_nan(value):
    """NaN and infinities as null, so that the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_nan(v) for v in value]
    return value


def parse_int_list(text, flag):
    values = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise SystemExit(f"{flag}: '{item}' is not a positive integer")
        values.append(int(item))
    return values


def short_error(exc):
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 400 else text[:400] + "..."


def set_experts(model, name):
    """Switches the experts backend at run time; False where this transformers cannot."""
    if hasattr(model, "set_experts_implementation"):
        try:
            model.set_experts_implementation(name)
            return True
        except Exception:  # an unknown backend name, or a model without experts interface
            return False
    return False


def load_model(torch, transformers, path, experts):
    """bf16 on the GPU with sdpa attention; falls back for older keyword names and without accelerate."""
    base = {"attn_implementation": "sdpa"}
    attempts = [
        dict(base, dtype=torch.bfloat16, experts_implementation=experts, device_map="cuda"),
        dict(base, dtype=torch.bfloat16, device_map="cuda"),
        dict(base, torch_dtype=torch.bfloat16, device_map="cuda"),  # transformers 4.x
        dict(base, torch_dtype=torch.bfloat16),  # no accelerate: load on the host, then move
    ]
    errors = []
    for attempt in attempts:
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(path, **attempt)
            if "device_map" not in attempt:
                model = model.to("cuda")
            model.eval()
            return model, errors
        except (TypeError, ValueError, ImportError) as exc:  # a keyword this version lacks, no accelerate
            errors.append(short_error(exc))
    raise RuntimeError("could not load the model: " + " | ".join(errors))


def has_grouped_mm(torch):
    return hasattr(torch, "_grouped_mm") or hasattr(torch.nn.functional, "grouped_mm")


def make_cache(transformers, torch, model, kind, batch, max_len):
    if kind == "dynamic":
        return transformers.DynamicCache()
    try:  # transformers 5: batch size, device and dtype come from the first update
        return transformers.StaticCache(config=model.config, max_cache_len=max_len)
    except TypeError:  # 4.x signature
        return transformers.StaticCache(
            config=model.config, max_batch_size=batch, max_cache_len=max_len, device="cuda", dtype=torch.bfloat16
        )


def forward(fn, **kwargs):
    try:
        return fn(logits_to_keep=1, **kwargs)
    except TypeError:  # versions without logits_to_keep
        return fn(**kwargs)


def run_once(torch, transformers, model, args, c, experts, prefill_experts, cache_kind, compile_mode):
    """Prefill, then warm-up and timed decode steps; returns the step times in ms."""
    device = "cuda"
    gen = torch.Generator(device="cpu").manual_seed(args.seed * 1000 + c)
    ids = torch.randint(0, model.config.vocab_size, (c, args.input_len), generator=gen).to(device)
    max_len = args.input_len + args.warmup + args.steps + 1
    cache = make_cache(transformers, torch, model, cache_kind, c, max_len)
    if prefill_experts:
        set_experts(model, prefill_experts)
    with torch.inference_mode():
        out = forward(
            model.forward,
            input_ids=ids,
            past_key_values=cache,
            cache_position=torch.arange(args.input_len, device=device),
            use_cache=True,
        )
        next_token = out.logits[:, -1:].argmax(-1)
    del out
    set_experts(model, experts)
    step = model.forward
    if compile_mode:
        torch._dynamo.reset()
        step = torch.compile(model.forward, mode=compile_mode, fullgraph=False)
    times_ms = []
    position = args.input_len
    with torch.inference_mode():
        for i in range(args.warmup + args.steps):
            cache_position = torch.tensor([position], device=device)
            torch.cuda.synchronize()
            start = time.perf_counter()
            logits = forward(
                step, input_ids=next_token, past_key_values=cache, cache_position=cache_position, use_cache=True
            ).logits
            next_token = logits[:, -1:].argmax(-1).clone()  # clone: a CUDA graph's output is overwritten
            torch.cuda.synchronize()
            elapsed = (time.perf_counter() - start) * 1e3
            if i >= args.warmup:
                times_ms.append(elapsed)
            position += 1
    return times_ms


def measure(torch, transformers, model, args, c, experts, prefill_experts):
    """Tries static+compile, static eager, dynamic eager; returns the result record of the first that ran."""
    compile_mode = args.compile_mode or DEFAULT_COMPILE_MODES.get(experts, "default")
    plans = []
    if args.compile != "off":
        plans.append(("static", compile_mode, f"static cache + torch.compile(mode={compile_mode})"))
    if args.compile != "on":
        plans.append(("static", None, "static cache, eager"))
        plans.append(("dynamic", None, "dynamic cache, eager"))
    failures = []
    for cache_kind, mode, label in plans:
        try:
            times = run_once(torch, transformers, model, args, c, experts, prefill_experts, cache_kind, mode)
            d = distribution(times)
            return {
                "concurrency": c,
                "experts": experts,
                "experts_effective": getattr(model.config, "_experts_implementation", None),
                "prefill_experts": prefill_experts,
                "execution": label,
                "failed_attempts": failures,
                "step_ms": d,
                "samples_ms": times,
                "tokens_per_s": c * 1e3 / d["median"],
            }
        except Exception as exc:  # compile, capture or memory failures: fall back and say so
            failures.append({"execution": label, "error": short_error(exc)})
            print(f"[peer] c={c} {experts}: {label} failed: {short_error(exc)}", file=sys.stderr, flush=True)
            if args.verbose:
                traceback.print_exc()
            torch._dynamo.reset()
            torch.cuda.empty_cache()
    return {"concurrency": c, "experts": experts, "prefill_experts": prefill_experts, "execution": None,
            "failed_attempts": failures, "step_ms": None, "samples_ms": [], "tokens_per_s": None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint directory (config.json + safetensors)")
    p.add_argument("--concurrency", default="1,16", help="batch sizes, comma-separated (default 1,16)")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens per sequence (default 128)")
    p.add_argument("--warmup", type=int, default=8, help="untimed decode steps (compilation happens here)")
    p.add_argument("--steps", type=int, default=64, help="timed decode steps (default 64)")
    p.add_argument("--experts", default="batched_mm,grouped_mm",
                   help="experts backends to measure, comma-separated; the fastest is the headline")
    p.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                   help="auto: compile, falling back to eager; on: compile only; off: eager only")
    p.add_argument("--compile-mode", default=None, help="torch.compile mode for every backend")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results as JSON to this file")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failed attempts")
    args = p.parse_args()
    concurrency = parse_int_list(args.concurrency, "--concurrency")
    candidates = [e.strip() for e in args.experts.split(",") if e.strip()]
    if args.input_len < 1 or args.steps < 1 or args.warmup < 0 or not candidates:
        raise SystemExit("--input-len and --steps must be >= 1, --warmup >= 0, --experts non-empty")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        raise SystemExit(f"--model {args.model}: no config.json there")

    try:
        import torch
        import transformers
    except ImportError as exc:
        raise SystemExit(f"this peer needs torch and transformers: {exc}")
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch")

    started = time.time()
    model, load_notes = load_model(torch, transformers, args.model, candidates[0])
    # Prefill with grouped_mm where torch has it (batched_mm would copy expert weights per prompt token).
    prefill_experts = "grouped_mm" if has_grouped_mm(torch) and set_experts(model, "grouped_mm") else None
    cfg = model.config
    print(f"[peer] loaded {args.model} in {time.time() - started:.0f} s: transformers {transformers.__version__}, "
          f"torch {torch.__version__}, {torch.cuda.get_device_name()}", file=sys.stderr, flush=True)

    results = []
    for c in concurrency:
        for experts in candidates:
            if not set_experts(model, experts) and experts != candidates[0]:
                results.append({"concurrency": c, "experts": experts, "execution": None, "step_ms": None,
                                "failed_attempts": [{"execution": "-", "error": "backend not available"}]})
                continue
            r = measure(torch, transformers, model, args, c, experts, prefill_experts)
            results.append(r)
            if r["step_ms"]:
                print(f"[peer] c={c} {experts} ({r['execution']}): median {r['step_ms']['median']:.2f} ms "
                      f"(p10 {r['step_ms']['p10']:.2f}, p90 {r['step_ms']['p90']:.2f})", file=sys.stderr, flush=True)

    best = {}
    for r in results:
        if r.get("step_ms") and (r["concurrency"] not in best or
                                 r["step_ms"]["median"] < best[r["concurrency"]]["step_ms"]["median"]):
            best[r["concurrency"]] = r
    print(f"{'conc':>5} {'step ms':>9} {'p10':>9} {'p90':>9} {'tok/s':>9}  experts / execution")
    for c in concurrency:
        r = best.get(c)
        if r is None:
            print(f"{c:>5} {'failed':>9}")
            continue
        s = r["step_ms"]
        print(f"{c:>5} {s['median']:9.2f} {s['p10']:9.2f} {s['p90']:9.2f} {r['tokens_per_s']:9.1f}  "
              f"{r['experts']} / {r['execution']}")

    record = {
        "tool": "transformers_decode",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command_line": sys.argv,
        "model": os.path.abspath(args.model),
        "model_shape": {k: getattr(cfg, k, None) for k in (
            "num_hidden_layers", "hidden_size", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
            "num_attention_heads", "num_key_value_heads", "vocab_size")},
        "options": {"concurrency": concurrency, "input_len": args.input_len, "warmup": args.warmup,
                    "steps": args.steps, "experts": candidates, "compile": args.compile,
                    "compile_mode": args.compile_mode, "seed": args.seed},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "cuda": torch.version.cuda,
                     "gpu": torch.cuda.get_device_name()},
        "machine": {"hostname": socket.gethostname(), "nproc": os.cpu_count()},
        "load_notes": load_notes,
        "results": results,
        "best": {str(c): best[c] for c in best},
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(without_nan(record), f, indent=1, allow_nan=False, default=str)
            f.write("\n")
        print(f"[peer] wrote {args.json}", file=sys.stderr)
    return 0 if len(best) == len(concurrency) else 1


if __name__ == "__main__":
    sys.exit(main())
