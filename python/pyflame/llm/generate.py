"""Token generation: greedy (temperature 0) or sampled with temperature,
top-k and top-p, through the general ops argmax, topk, sort, cumsum and
multinomial (seeded by pf.manual_seed, so a seed gives the same tokens on
every device)."""
import pyflame as pf


def sample_logits(logits, temperature=0.0, top_k=None, top_p=None):
    """Next-token ids (B,) int64 for logits (B, V)."""
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


def _prompt_list(prompt_ids):
    if isinstance(prompt_ids, pf.Tensor):
        prompt_ids = prompt_ids.numpy().tolist()
    ids = [int(t) for t in prompt_ids]
    if not ids:
        raise ValueError("[generate] the prompt is empty")
    return ids


def stream_generate(model, prompt_ids, max_tokens, temperature=0.0, top_k=None, top_p=None,
                    seed=None, stop=None):
    """Yields up to max_tokens new token ids (ints) for a 1-d prompt, as they
    are produced. Prefill runs the whole prompt through the model once; each
    later token is one decode step on a fixed-capacity KV cache. seed: calls
    pf.manual_seed(seed) first. stop: a token id or ids that end generation
    (yielded, then stop); default: the config's eos_token_id."""
    ids = _prompt_list(prompt_ids)
    if max_tokens <= 0:
        return
    stop = model.config.eos_token_id if stop is None else stop
    stop = {int(stop)} if isinstance(stop, int) else {int(s) for s in stop}
    if seed is not None:
        pf.manual_seed(int(seed))
    cache = model.make_cache(1, len(ids) + max_tokens)
    logits = model([ids], cache)
    for i in range(max_tokens):
        last = logits[:, -1, :]
        tok = int(sample_logits(last, temperature, top_k, top_p).item())
        yield tok
        if tok in stop or i + 1 == max_tokens:
            return
        logits = model([[tok]], cache)


def generate(model, prompt_ids, max_tokens, temperature=0.0, top_k=None, top_p=None, seed=None,
             stop=None):
    """The list of new token ids (see stream_generate)."""
    return list(stream_generate(model, prompt_ids, max_tokens, temperature, top_k, top_p, seed, stop))
