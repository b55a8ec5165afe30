"""PyTorch side of `node tools/bench.js gpu-report`: the same supervised training step and generation as
tools/bench/train.ts and tools/bench/rollout.ts, in PyTorch eager fp32 (TF32 off: the arithmetic of the WGSL f32
kernels) on the same card, and cuBLAS fp32 at the report's matmul shapes.

  python3 tools/bench/torch_step.py '<json spec>'      # the report writes the spec; prints one JSON object

The spec: {"configs": [{"name", "layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "tie"}],
"batch", "seq_len", "steps", "warmup", "gen": {"configs": [names], "batch", "prompt_len", "new_tokens", "runs"},
"matmul": [[M, N, K]], "allow_cpu": bool}. The model is the engine's Llama (RMSNorm, rotate-half RoPE, grouped-query
attention written out as matmul + softmax as Hugging Face's "eager" attention, SwiGLU), random weights; the step is
forward, masked mean cross-entropy over each row's second half, backward, gradient clipping to norm 1 and AdamW
(lr 1e-3, betas 0.9/0.95, weight decay 0.01). Generation prefills the prompts, then samples one token per step at
temperature 1 against a KV cache. Times are medians; the device is synchronised before each clock read.
"""
import json
import math
import sys
import time


def main(argv):
    spec = json.loads(argv[1])
    try:
        import torch
    except ImportError as err:
        print(json.dumps({"skipped": f"python3 cannot import torch ({err})"}))
        return
    if torch.cuda.is_available():
        device = torch.device("cuda")
        name = torch.cuda.get_device_name()
    elif spec.get("allow_cpu"):
        device = torch.device("cpu")
        name = "cpu"
    else:
        print(json.dumps({"skipped": "torch sees no CUDA device"}))
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(fn, runs, warmup):
        for _ in range(warmup):
            fn()
        sync()
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            sync()
            samples.append((time.perf_counter() - start) * 1000)
        return sorted(samples)[len(samples) // 2]

    configs = {c["name"]: c for c in spec["configs"]}
    B, T = spec["batch"], spec["seq_len"]
    train = []
    for c in spec["configs"]:
        model = Llama(torch, c, device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01)
        ids = torch.randint(1, c["vocab"], (B, T), device=device)
        weights = torch.zeros(B, T, device=device)
        weights[:, T // 2 - 1 : T - 1] = 1 / (B * (T // 2))
        targets = torch.roll(ids, -1, 1)

        def step():
            opt.zero_grad(set_to_none=True)
            logits = model(ids)
            logp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            loss = -(logp * weights).sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        ms = timed(step, spec["steps"], spec["warmup"])
        train.append({"config": c["name"], "batch": B, "seq_len": T, "ms": ms, "tokens_per_s": B * T / (ms / 1000)})
        del model, opt

    gen = spec["gen"]
    generation = []
    for cname in gen["configs"]:
        c = configs[cname]
        model = Llama(torch, c, device)
        prompts = torch.randint(0, c["vocab"], (gen["batch"], gen["prompt_len"]), device=device)

        @torch.no_grad()
        def generate():
            cache = [None] * c["layers"]
            logits = model(prompts, cache=cache)[:, -1]
            for s in range(gen["new_tokens"]):
                token = torch.multinomial(torch.softmax(logits, -1), 1)
                if s + 1 < gen["new_tokens"]:
                    logits = model(token, pos0=gen["prompt_len"] + s, cache=cache)[:, -1]

        ms = timed(generate, gen["runs"], 1)
        generation.append({"config": cname, "batch": gen["batch"], "new_tokens": gen["new_tokens"], "ms": ms,
                           "tokens_per_s": gen["batch"] * gen["new_tokens"] / (ms / 1000)})
        del model

    matmul = []
    for m, n, k in spec["matmul"]:
        a = torch.randn(m, k, device=device)
        b = torch.randn(n, k, device=device)
        out = torch.empty(m, n, device=device)
        ms = timed(lambda: torch.matmul(a, b.t(), out=out), 5, 1)
        matmul.append({"kernel": "matmul nt", "shape": f"{m}x{n}x{k}", "ms": ms, "gflops": 2 * m * n * k / ms / 1e6})
    print(json.dumps({"device": name, "torch": torch.__version__, "train": train, "generation": generation, "matmul": matmul}))


def Llama(torch, c, device):
    nn = torch.nn
    C, L, NH, KV, I, V = c["hidden"], c["layers"], c["heads"], c["kv_heads"], c["intermediate"], c["vocab"]
    HS = C // NH

    class RmsNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(C))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_norm, self.post_norm = RmsNorm(), RmsNorm()
            self.q, self.k, self.v = nn.Linear(C, NH * HS, bias=False), nn.Linear(C, KV * HS, bias=False), nn.Linear(C, KV * HS, bias=False)
            self.o = nn.Linear(NH * HS, C, bias=False)
            self.gate, self.up, self.down = nn.Linear(C, I, bias=False), nn.Linear(C, I, bias=False), nn.Linear(I, C, bias=False)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, C)
            self.layers = nn.ModuleList(Layer() for _ in range(L))
            self.norm = RmsNorm()
            self.head = nn.Linear(C, V, bias=False)
            if c["tie"]:
                self.head.weight = self.embed.weight
            inv = 10000.0 ** (-torch.arange(0, HS, 2, dtype=torch.float32) / HS)
            self.register_buffer("inv_freq", inv, persistent=False)

        def rope(self, x, pos):
            angles = pos[:, None].float() * self.inv_freq[None, :]
            angles = torch.cat([angles, angles], -1)
            x1, x2 = x[..., : HS // 2], x[..., HS // 2 :]
            return x * angles.cos() + torch.cat([-x2, x1], -1) * angles.sin()

        def forward(self, ids, pos0=0, cache=None):
            Bn, Tn = ids.shape
            pos = torch.arange(pos0, pos0 + Tn, device=ids.device)
            x = self.embed(ids)
            for l, layer in enumerate(self.layers):
                h = layer.input_norm(x)
                q = self.rope(layer.q(h).view(Bn, Tn, NH, HS).transpose(1, 2), pos)
                k = self.rope(layer.k(h).view(Bn, Tn, KV, HS).transpose(1, 2), pos)
                v = layer.v(h).view(Bn, Tn, KV, HS).transpose(1, 2)
                if cache is not None:
                    if cache[l] is not None:
                        k = torch.cat([cache[l][0], k], 2)
                        v = torch.cat([cache[l][1], v], 2)
                    cache[l] = (k, v)
                k = k.repeat_interleave(NH // KV, 1)
                v = v.repeat_interleave(NH // KV, 1)
                scores = q @ k.transpose(-1, -2) / math.sqrt(HS)
                if Tn > 1:
                    total = k.shape[2]
                    mask = torch.ones(Tn, total, dtype=torch.bool, device=ids.device).tril(total - Tn)
                    scores = scores.masked_fill(~mask, float("-inf"))
                att = torch.softmax(scores, -1) @ v
                x = x + layer.o(att.transpose(1, 2).reshape(Bn, Tn, NH * HS))
                g = layer.post_norm(x)
                x = x + layer.down(torch.nn.functional.silu(layer.gate(g)) * layer.up(g))
            return self.head(self.norm(x))

    model = Model().to(device)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.uniform_(-0.02, 0.02)
    return model


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv)
