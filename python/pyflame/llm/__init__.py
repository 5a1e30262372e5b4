"""pyflame.llm: load a Hugging Face Llama-family checkpoint and generate text.

    import pyflame.llm as llm
    model, tokenizer = llm.load("path/to/model", dtype=pf.float16, device="rocm")
    ids = tokenizer.encode("Hello").ids
    print(tokenizer.decode(llm.generate(model, ids, max_tokens=32)))

Supported: Llama 2 and 3 (incl. llama3 rope_scaling), Mistral and Qwen2 (q/k/v
biases) with sliding windows, grouped-query attention, tied embeddings; batches
of prompts of different lengths; model.safetensors or sharded checkpoints;
float32, float16 and bfloat16 weights.
"""
from .config import ModelConfig, SUPPORTED_MODEL_TYPES  # noqa: F401
from .generate import generate, sample_logits, stream_generate  # noqa: F401
from .loader import load  # noqa: F401
from .model import KVCache, LlamaModel  # noqa: F401
