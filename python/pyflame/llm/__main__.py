"""python -m pyflame.llm --model DIR --prompt "..." --max-tokens N [--device ...]

Prints the text as it is generated, then the prefill and decode rates."""
import argparse
import sys
import time

import pyflame as pf
from . import load, stream_generate


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyflame.llm", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hugging Face model directory")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--device", default=None, help="cpu, rocm, rocm:N (default: pf.get_device())")
    ap.add_argument("--dtype", default=None, help="float32, float16 or bfloat16 (default: the checkpoint's)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=None)
    ap.add_argument("--top-p", type=float, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-compile", action="store_true",
                    help="run each decode step eagerly (default: one compiled step replayed per token)")
    args = ap.parse_args(argv)
    try:
        model, tok = load(args.model, dtype=args.dtype, device=args.device)
    except (ValueError, RuntimeError) as e:  # bad directory or config, unavailable device
        sys.exit(str(e))
    if tok is None:
        sys.exit(f"[llm] no tokenizer.json in {args.model}")
    prompt = tok.encode(args.prompt).ids
    # Decoding the whole sequence keeps the tokenizer's spacing between the
    # prompt and the new text; each step prints what the new token added.
    shown = tok.decode(prompt)
    print(shown, end="", flush=True)
    out = []
    t0 = time.perf_counter()
    t_first = None
    for t in stream_generate(model, prompt, args.max_tokens, args.temperature, args.top_k,
                             args.top_p, args.seed, compile=not args.no_compile):
        if t_first is None:
            t_first = time.perf_counter()
        out.append(t)
        text = tok.decode(prompt + out)
        print(text[len(shown):], end="", flush=True)
        shown = text
    t1 = time.perf_counter()
    print()
    pf.synchronize()
    prefill = len(prompt) / (t_first - t0) if t_first else 0.0
    decode = (len(out) - 1) / (t1 - t_first) if len(out) > 1 else 0.0
    print(f"prefill: {len(prompt)} tokens, {prefill:.1f} tok/s (incl. the first sample); "
          f"decode: {len(out) - 1} tokens, {decode:.1f} tok/s", file=sys.stderr)


if __name__ == "__main__":
    main()
