"""Token generation: greedy (temperature 0) or sampled with temperature,
top-k and top-p, through the general ops argmax, topk, sort, cumsum and
multinomial (seeded by pf.manual_seed, so a seed gives the same tokens on
every device)."""
import math
import numbers

import pyflame as pf


def _fail(msg, exc=ValueError):
    raise exc(f"[generate] {msg}")


def _token(t, what):
    """A token id: an integer (a NumPy or 0-d tensor one too), not a float
    that would be truncated."""
    if isinstance(t, pf.Tensor) and t.ndim == 0:
        t = t.item()
    if isinstance(t, bool) or not isinstance(t, numbers.Integral):
        _fail(f"{what} must hold integer token ids, got {t!r}", TypeError)
    return int(t)


def _check_sampling(temperature, top_k, top_p):
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, numbers.Real)
                                    or not 0 <= temperature < math.inf):
        _fail(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral)):
        _fail(f"top_k must be an integer, got {top_k!r}", TypeError)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real)):
        _fail(f"top_p must be a number, got {top_p!r}", TypeError)


def sample_logits(logits, temperature=0.0, top_k=None, top_p=None):
    """Next-token ids (B,) int64 for logits (B, V)."""
    _check_sampling(temperature, top_k, top_p)
    if temperature is None or temperature <= 0:
        return pf.argmax(logits, -1)
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"[generate] top_p must be in (0, 1], got {top_p}")
    if top_k is not None and top_k <= 0:
        raise ValueError(f"[generate] top_k must be positive, got {top_k}")
    x = logits.astype(pf.float32) / float(temperature)
    V = x.shape[-1]
    if top_k is None and (top_p is None or top_p >= 1):
        return pf.multinomial(pf.softmax(x, -1), 1, replacement=True).reshape([x.shape[0]])
    if top_k is not None and top_k < V:
        vals, idx = pf.topk(x, int(top_k), -1)          # sorted, largest first
    else:
        vals, idx = pf.sort(x, -1, descending=True)
    probs = pf.softmax(vals, -1)
    if top_p is not None and top_p < 1:
        # Keep the smallest prefix whose mass reaches top_p: a token goes when
        # the mass before it already does (the first one always stays).
        before = pf.cumsum(probs, -1) - probs
        probs = pf.where(before >= top_p, pf.zeros_like(probs), probs)
    choice = pf.multinomial(probs, 1, replacement=True)  # (B, 1) positions in the candidates
    return pf.gather(idx, -1, choice).reshape([x.shape[0]])


def _row(ids, what):
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        _fail(f"{what} must be a list of token ids, got {type(ids).__name__}", TypeError)
    ids = [_token(t, what) for t in ids]
    if not ids:
        raise ValueError(f"[generate] {what} is empty")
    return ids


def _prompts(prompt_ids):
    """(rows, batched): a 1-d prompt is one row; a list of prompts (or a 2-d
    tensor) is a batch."""
    if isinstance(prompt_ids, pf.Tensor):
        prompt_ids = prompt_ids.numpy().tolist()
    if isinstance(prompt_ids, (str, bytes)) or not hasattr(prompt_ids, "__iter__"):
        _fail(f"prompt_ids must be a list of token ids or of prompts, got {type(prompt_ids).__name__}",
              TypeError)
    prompt_ids = list(prompt_ids)
    if prompt_ids and all(not isinstance(p, (int, float)) and hasattr(p, "__len__") for p in prompt_ids):
        return [_row(p, f"prompt {i}") for i, p in enumerate(prompt_ids)], True
    return [_row(prompt_ids, "the prompt")], False


def _stop_set(model, stop):
    stop = model.config.eos_token_id if stop is None else stop
    if isinstance(stop, numbers.Integral):
        return {_token(stop, "stop")}
    return set(_row(stop, "stop")) if stop else set()


def stream_generate(model, prompt_ids, max_tokens, temperature=0.0, top_k=None, top_p=None,
                    seed=None, stop=None, compile=True):
    """Yields up to max_tokens new token ids as they are produced.

    prompt_ids: one prompt (a list of ids or a 1-d tensor): yields ints. Or a
    batch, a list of prompts of any lengths (or a 2-d tensor): yields a list
    per step with one id per row, None for rows that have finished. Prompts
    are left-padded to the longest; each row decodes as it would alone.

    Prefill runs the prompts through the model once; each later token is one
    decode step on a fixed-capacity KV cache. seed: calls pf.manual_seed(seed)
    first. stop: a token id or ids that end a row (yielded, then the row
    stops); default: the config's eos_token_id. Generation ends when every
    row has stopped or after max_tokens steps. compile: decode through the
    cache's compiled step (``model.decode``: one trace, on a GPU one graph
    replayed per token); False runs every step eagerly. Both give the same
    tokens."""
    rows, batched = _prompts(prompt_ids)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, numbers.Integral):
        _fail(f"max_tokens must be an integer, got {max_tokens!r}", TypeError)
    _check_sampling(temperature, top_k, top_p)
    if max_tokens <= 0:
        return
    stop = _stop_set(model, stop)
    if seed is not None:
        pf.manual_seed(seed)  # checks the seed under its own name
    width = max(len(r) for r in rows)
    pad = [width - len(r) for r in rows]
    # Padding slots hold token 0; the mask keeps them out of every real row.
    cache = model.make_cache(len(rows), width + max_tokens, pad if any(pad) else None)
    logits = model([[0] * p + r for p, r in zip(pad, rows)], cache)
    done = [False] * len(rows)
    for i in range(max_tokens):
        toks = sample_logits(logits[:, -1, :], temperature, top_k, top_p).numpy().tolist()
        step = [None if d else t for d, t in zip(done, toks)]
        yield step if batched else step[0]
        done = [d or t in stop for d, t in zip(done, toks)]
        if all(done) or i + 1 == max_tokens:
            return
        # Finished rows keep stepping (fixed shapes); their tokens are dropped.
        run = model.decode if compile else model
        logits = run([[t] for t in toks], cache)


def generate(model, prompt_ids, max_tokens, temperature=0.0, top_k=None, top_p=None, seed=None,
             stop=None, compile=True):
    """The new token ids (see stream_generate): a list for one prompt, a list
    of lists (one per prompt, each ending at its stop token) for a batch."""
    rows, batched = _prompts(prompt_ids)
    steps = stream_generate(model, rows if batched else rows[0], max_tokens, temperature, top_k,
                            top_p, seed, stop, compile)
    if not batched:
        return list(steps)
    out = [[] for _ in rows]
    for step in steps:
        for row, t in zip(out, step):
            if t is not None:
                row.append(t)
    return out
