"""Model presets: published architectures, each with the source of its numbers.

Sequence length is the pre-training length of the paper; micro-batch size 1 (what Megatron-LM runs at these
sizes); both can be changed with ``--seq-len`` and ``--micro-batch-size``.
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.model_spec import ModelSpec


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200, seq_len: int = 2048,
         dropout: bool = True, tied: bool = True) -> ModelSpec:
    # GPT-style: MHA, 4h GeLU MLP, LayerNorm, biases, dropout, learned positions, tied embeddings (GPT-2/3).
    return ModelSpec(name, layers, hidden, heads, 4 * hidden, vocab, seq_len, tied_embeddings=tied,
                     learned_positions=True, dropout=dropout)


def _llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
           seq_len: int) -> ModelSpec:
    # Llama: GQA, SwiGLU, RMSNorm, no biases, no dropout, RoPE, untied output layer.
    return ModelSpec(name, layers, hidden, heads, ffn, vocab, seq_len, kv_heads=kv_heads, gated=True,
                     dropout=False, bias=False, rms_norm=True)


_PRESETS = [
    # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (n_layers, d_model, n_heads,
    # n_ctx 2048); vocabulary 50257, padded to 51200 as Megatron-LM does (Narayanan et al. 2021, §5.1).
    _gpt("gpt3-1.3b", 24, 2048, 16),
    _gpt("gpt3-2.7b", 32, 2560, 32),
    _gpt("gpt3-6.7b", 32, 4096, 32),
    _gpt("gpt3-175b", 96, 12288, 96),
    # Zhang et al. 2022, "OPT: Open Pre-trained Transformer Language Models", Table 1 (175B: 96 layers, 96 heads,
    # 12288 wide) and metaseq's launcher (metaseq/launcher/opt_job_constants.py: ffn 4h; opt_baselines.py: ReLU,
    # learned positions, tied embeddings, dropout 0.1, sequence 2048); the released checkpoints' 50272-row
    # embedding (GPT-2's BPE). ReLU and GeLU are one element-wise op each to pipesim.
    _gpt("opt-175b", 96, 12288, 96, vocab=50272),
    # Peng et al. 2023, "FP8-LM: Training FP8 Large Language Models", its GPT-7B, 13B and 175B as Azure's
    # MS-AMP-Examples trains them with Megatron-LM (gpt3/pretrain_6b7_megatron.sh, pretrain_13b_megatron.sh: 32
    # layers of 4096 with 32 heads, 40 of 5120 with 40; sequence 2048; --attention-dropout 0.0 --hidden-dropout
    # 0.0); the 175B is GPT-3's shape. GPT-2's BPE (50257) padded by Megatron-LM to a multiple of 128·tp at the
    # source's tp: 50304 (tp 1), 50432 (tp 2), 51200 (tp 8).
    _gpt("fp8lm-gpt-7b", 32, 4096, 32, vocab=50304, dropout=False),
    _gpt("fp8lm-gpt-13b", 40, 5120, 40, vocab=50432, dropout=False),
    _gpt("fp8lm-gpt-175b", 96, 12288, 96, dropout=False),
    # Yeung et al. 2024, "Balancing Pipeline Parallelism with Vocabulary Parallelism", the model of its
    # experiments (sail-sg/VocabularyParallelism, artifact/README.md and exp_one_host.csv: 32 layers of 3072, 24
    # heads, MLP 12288; pretrain_gpt.sh: Megatron-Core's GPT with --untie-embeddings-and-output-weights, dropout 0)
    # at each of its four SentencePiece vocabularies (32k to 256k, multiples of 128 as they are).
    *(_gpt(f"vocab-4b-v{size // 1000}k", 32, 3072, 24, vocab=size, dropout=False, tied=False)
      for size in (32000, 64000, 128000, 256000)),
    # NeMo's GPT-3 5B and 20B (NeMo-Framework-Launcher, launcher_scripts/conf/training/gpt3/{5b,20b}.yaml:
    # num_layers, hidden_size, num_attention_heads, ffn 4h, sequence 2048, learned positions, dropout 0.1,
    # GPT-2's 50257-token BPE padded to a multiple of 128 as make_vocab_size_divisible_by sets: 50304).
    _gpt("gpt3-5b", 24, 4096, 32, vocab=50304),
    _gpt("gpt3-20b", 44, 6144, 48, vocab=50304),
    # Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
    # Megatron-LM", Table 1 (heads, hidden, layers; vocabulary 51200, sequence 2048).
    _gpt("gpt-1.7b", 24, 2304, 24),
    _gpt("gpt-3.6b", 30, 3072, 32),
    _gpt("gpt-7.5b", 36, 4096, 32),
    _gpt("gpt-18.4b", 40, 6144, 48),
    _gpt("gpt-39.1b", 48, 8192, 64),
    _gpt("gpt-76.1b", 60, 10240, 80),
    _gpt("gpt-145.6b", 80, 12288, 96),
    _gpt("gpt-310.1b", 96, 16384, 128),
    _gpt("gpt-529.6b", 105, 20480, 128),
    _gpt("gpt-1008b", 128, 25600, 160),
    # Korthikanti et al. 2023, "Reducing Activation Recomputation in Large Transformer Models", Table 3
    # (heads, hidden, layers; sequence 2048, vocabulary 51200). Their 175B is GPT-3's shape (gpt3-175b).
    _gpt("gpt-22b", 48, 6144, 64),
    _gpt("gpt-530b", 105, 20480, 128),
    _gpt("gpt-1t", 128, 25600, 160),
    # Qi et al. 2024, "Zero Bubble Pipeline Parallelism", Table 3 (layers, heads, hidden, sequence 1024) and
    # their Megatron-LM script of the time (examples/pretrain_zero_bubble.sh: GPTSentencePieceTokenizer, a
    # 32000-token vocabulary; learned positions, tied embeddings, dropout 0.1, unfused attention).
    _gpt("zb-1.5b", 22, 2304, 24, vocab=32000, seq_len=1024),
    _gpt("zb-6.2b", 30, 4096, 32, vocab=32000, seq_len=1024),
    _gpt("zb-14.6b", 46, 5120, 40, vocab=32000, seq_len=1024),
    _gpt("zb-28.3b", 62, 6144, 48, vocab=32000, seq_len=1024),
    # Megatron-LM's GPT with --swiglu at Llama 2 7B's depth and width, as the memory table of Megatron-LM's
    # tools/get_training_info README (PR #482, 2023) ran it: its printout of the model (32 layers, hidden 4096,
    # 32 heads, SwiGLU of 10880 = int(8h/3 / 64)·64, Megatron's default with --swiglu, biases, LayerNorm, learned
    # positions, tied embeddings, GPT-2's vocabulary padded to 50432; 6,642,245,632 parameters), sequence 2048.
    replace(_gpt("gpt-swiglu-6.6b", 32, 4096, 32, vocab=50432), ffn_hidden=10880, gated=True),
    # Hagemann et al. 2023's LLaMA-shaped 13B, 30B and 65B (Aleph Alpha's scaling framework): Touvron et al.
    # 2023's LLaMA shapes (Table 2: dimension, heads, layers; context 2048), with Aleph Alpha's 128,000-token
    # vocabulary (untied) and the MLP width the framework's mlp_factor gives (13824, 17888, 22016): the published
    # MFU and TFLOP/s columns agree on the 4,194,304-token batch only with these (pipesim/validation/sources/
    # hagemann2023.py).
    _llama("aa-llama-13b", 40, 5120, 40, 40, 13824, 128000, 2048),
    _llama("aa-llama-30b", 60, 6656, 52, 52, 17888, 128000, 2048),
    _llama("aa-llama-65b", 80, 8192, 64, 64, 22016, 128000, 2048),
    # Touvron et al. 2023, "Llama 2", Table 1 and the released config.json files (hidden_size,
    # intermediate_size, num_attention_heads, num_key_value_heads, vocab_size 32000; context 4096).
    _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
    _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
    # Llama 2 34B, trained but not released: Touvron et al. 2023, Table 1 (34B with grouped-query attention) and the
    # shape IBM's fms-fsdp trains under that name (fms_fsdp/utils/config_utils.py, ``llama2_34b``: 48 layers × 8192,
    # 64 heads, 8 KV heads, MLP 22016, Llama 2's 32000-token vocabulary), Code Llama 34B's released shape too.
    _llama("llama2-34b", 48, 8192, 64, 8, 22016, 32000, 4096),
    _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
    # Llama Team 2024, "The Llama 3 Herd of Models", Table 3 (layers, model dim, FFN dim, heads, 8 KV heads,
    # vocabulary 128,000 → 128256 in config.json); pre-training sequence length 8192 (§3.4.1).
    _llama("llama3.1-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
    _llama("llama3.1-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
    _llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
    # Llama 3.2 1B and 3B, the released config.json files (hidden_size, num_hidden_layers, num_attention_heads,
    # num_key_value_heads 8, intermediate_size 8192, vocab_size 128256, tie_word_embeddings true); sequence 8192
    # as the 3.1 presets (the context is extended to 128k after pre-training).
    replace(_llama("llama3.2-1b", 16, 2048, 32, 8, 8192, 128256, 8192), tied_embeddings=True),
    replace(_llama("llama3.2-3b", 28, 3072, 24, 8, 8192, 128256, 8192), tied_embeddings=True),
    # Hugging Face's SmolLM3-3B (its nanotron configs, HuggingFaceTB/smollm3-configs stage1_8T.yaml: 36 layers ×
    # 2048, 16 heads, 4 KV heads, MLP 11008, Llama 3's 128,256-token vocabulary tied, sequence 4096 in pre-training;
    # RoPE skipped on every 4th layer, which moves no FLOP): the smol2025 validation source.
    replace(_llama("smollm3-3b", 36, 2048, 16, 4, 11008, 128256, 4096), tied_embeddings=True),
    # AllenAI OLMo-core's model factories (src/olmo_core/nn/transformer/config.py, TransformerConfig.llama_like:
    # SwiGLU, RMSNorm, no biases, RoPE, untied output layer; the MLP 256·ceil(int(8h/3)/256)), the dolma2 tokenizer's
    # 100,278 tokens padded to a multiple of 128 (100352), sequence 4096: its llama2_1B/7B/13B and olmo_1B/7B/13B
    # (the latter add QK-norm, which pipesim does not model: the same shapes) and its llama3_8B at Llama 3 8B's
    # shape with the dolma2 vocabulary. For the olmo_core2024 validation source; olmo-core-1b is not the released
    # OLMo-2-0425-1B (16 layers, MLP 8192).
    _llama("olmo-core-1b", 18, 2048, 16, 16, 5632, 100352, 4096),
    _llama("olmo-core-7b", 32, 4096, 32, 32, 11008, 100352, 4096),
    _llama("olmo-core-13b", 40, 5120, 40, 40, 13824, 100352, 4096),
    _llama("olmo-core-llama3-8b", 32, 4096, 32, 8, 14336, 100352, 4096),
    # InternLM-7B as InternEvo trained it in July 2023 (InternLM/InternEvo at c18bec9, configs/7B_sft.py: 32 layers,
    # hidden 4096, 32 heads, mlp_ratio 8/3 rounded up to a multiple of 256 by its FeedForward: 11008; vocabulary
    # 103168; sequence 2048; RMSNorm, RoPE, SwiGLU, untied output layer). Its attention's QKV and output
    # projections carry biases (16,384 parameters a layer), which this preset leaves out. For the internevo2023
    # validation source.
    _llama("internlm-7b", 32, 4096, 32, 32, 11008, 103168, 2048),
    # MosaicML llm-foundry, scripts/train/yamls/pretrain/mpt-{7b,13b,30b,70b}.yaml (n_layers, d_model, n_heads,
    # expansion_ratio 4, vocab_size 50368, max_seq_len 2048). The benchmark tables' NumParams column
    # (scripts/train/benchmarking/README.md) implies biases, LayerNorm with bias and a max_seq_len × d_model
    # learned position table (7b: 6,658,859,008 at 2048 tokens = 12·L·h² + 50368·h + 2048·h + 9h·L biases +
    # (4L + 2)·h norm parameters; 4,194,304 = 1024·h fewer at 1024 tokens), tied embeddings; no dropout (assumed:
    # the yamls set none).
    *(ModelSpec(name, layers, hidden, heads, 4 * hidden, 50368, 2048, tied_embeddings=True, learned_positions=True,
                dropout=False) for name, layers, hidden, heads in [
        ("mpt-125m", 12, 768, 12), ("mpt-350m", 24, 1024, 16), ("mpt-760m", 24, 1536, 12), ("mpt-1b", 24, 2048, 16),
        ("mpt-3b", 32, 2560, 20),
        ("mpt-7b", 32, 4096, 32), ("mpt-13b", 40, 5120, 40), ("mpt-30b", 48, 7168, 56), ("mpt-70b", 80, 8192, 64)]),
]



def _moe(name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int, seq_len: int,
         **moe) -> ModelSpec:
    # Llama-style blocks (RMSNorm, SwiGLU experts, RoPE, no biases, no dropout, untied output) with MoE MLPs.
    return ModelSpec(name, layers, hidden, heads, ffn, vocab, seq_len, kv_heads=kv_heads, gated=True,
                     dropout=False, bias=False, rms_norm=True, **moe)


def _nemotron4(name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int) -> ModelSpec:
    # Nemotron-4: GQA, RoPE, squared-ReLU MLP (two matrices, not gated), LayerNorm (layernorm1p), no biases, no
    # dropout, untied input and output embeddings, 256,000-token SentencePiece vocabulary, sequence 4096.
    return ModelSpec(name, layers, hidden, heads, ffn, 256000, 4096, kv_heads=kv_heads, dropout=False, bias=False)


_PRESETS += [
    # Parmar et al. 2024, "Nemotron-4 15B Technical Report" (arXiv 2402.16819), Table 1 and §2: 32 layers, hidden
    # 6144, 48 heads, 8 KV heads, sequence 4096, vocabulary 256,000; "3.2 billion embedding parameters and 12.5
    # billion non-embedding parameters". The MLP width is not in Table 1: 24576 (4h) is what the non-embedding
    # count implies (32 · (2·6144² + 2·6144·1024 + 2·6144·ffn) = 12.5B gives ffn ≈ 24.6k) and what NeMo's
    # launcher config of the model sets (conf/training/nemotron/nemotron_15b.yaml, ffn_hidden_size 24576).
    _nemotron4("nemotron-4-15b", 32, 6144, 48, 8, 24576),
    # Adler et al. 2024, "Nemotron-4 340B Technical Report" (arXiv 2406.11704), Table 1: 96 layers, hidden 18432,
    # 96 heads, 8 KV heads, sequence 4096, vocabulary 256,000; 9.4B embedding + 331.6B non-embedding parameters.
    # MLP width 73728 (4h): NeMo's launcher config (conf/training/nemotron/nemotron_340b.yaml, 4 · hidden_size)
    # and the public HF conversion's config.json (intermediate_size 73728, head_dim 192 = 18432 / 96).
    _nemotron4("nemotron-4-340b", 96, 18432, 96, 8, 73728),
    # NeMo's Nemotron 8B and 22B, the same block as Nemotron-4 with every head its own KV head
    # (NeMo-Framework-Launcher, launcher_scripts/conf/training/nemotron/nemotron_{8b,22b}.yaml: num_layers,
    # hidden_size, num_attention_heads, ffn_hidden_size, num_query_groups null, squared-relu, layernorm1p, rope,
    # bias false, sequence 4096, the 256k SentencePiece vocabulary of Nemotron-4).
    _nemotron4("nemotron-8b", 32, 4096, 32, 32, 16384),
    _nemotron4("nemotron-22b", 40, 6144, 48, 48, 24576),
    # Black et al. 2022, "GPT-NeoX-20B: An Open-Source Autoregressive Language Model" (arXiv 2204.06745) §2 and
    # the training config (EleutherAI/gpt-neox, configs/20B.yml): 44 layers, hidden 6144, 64 heads, 4h GeLU MLP,
    # vocabulary 50432 (padded), sequence 2048, LayerNorm, biases, rotary positions (on a quarter of each head),
    # attention and MLP in parallel off one LayerNorm each (the GPT-J residual), untied output layer, no dropout.
    ModelSpec("neox-20b", 44, 6144, 64, 24576, 50432, 2048, dropout=False),
    # Zeng et al. 2022, "GLM-130B: An Open Bilingual Pre-Trained Model" (arXiv 2210.02414) §2.1–2.3 and App. B.3
    # and the released model arguments (THUDM/GLM-130B, configs/model_glm_130b.sh): 70 layers (9 × 8 − 2),
    # hidden 12288, 96 heads, GeGLU MLP of 32768 (8/3·h), vocabulary 150528, sequence 2048, DeepNorm post-LN
    # (LayerNorm), RoPE, biases, dropout 0.1, output layer tied to the word embedding (SwissArmyTransformer).
    ModelSpec("glm-130b", 70, 12288, 96, 32768, 150528, 2048, gated=True, tied_embeddings=True),
    # Mistral AI, mistralai/Mixtral-8x7B-v0.1 config.json (hidden_size 4096, intermediate_size 14336, 32 layers,
    # 32 heads, 8 KV heads, num_local_experts 8, num_experts_per_tok 2, vocab 32000); Jiang et al. 2024,
    # "Mixtral of Experts" §2: 46.7B total, 12.9B active parameters, 32k-token context.
    _moe("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, experts=8, experts_per_token=2),
    # mistralai/Mixtral-8x22B-v0.1 config.json (6144, 16384, 56 layers, 48 heads, 8 KV heads, 8 experts top-2,
    # vocab 32768, max_position_embeddings 65536); Mistral's announcement: 141B total, 39B active.
    _moe("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, 65536, experts=8, experts_per_token=2),
    # DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv 2412.19437) §4.2 and deepseek-ai/DeepSeek-V3
    # config.json: 61 layers, hidden 7168, 128 heads, MLA (q_lora_rank 1536, kv_lora_rank 512, qk_nope 128,
    # qk_rope 64, v 128), the first 3 layers dense (intermediate_size 18432), the rest 1 shared + 256 routed
    # experts of 2048, top-8 from 4 of 8 groups (n_group 8, topk_group 4: node-limited routing, §2.1.2), vocab
    # 129280, untied; pre-training sequence 4096 (§4.2). 671B total, 37B active (§1); its one
    # multi-token-prediction module (§2.2, D = 1: num_nextn_predict_layers 1, a MoE layer; 14B with the embedding
    # and head copies its checkpoint stores) is trained with it and, as there, left out of that count.
    _moe("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096, experts=256, experts_per_token=8,
         expert_ffn_hidden=2048, shared_experts=1, first_dense_layers=3, expert_groups=8, expert_groups_per_token=4,
         mtp_layers=1,
         q_lora_rank=1536, kv_lora_rank=512,
         qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    # DeepSeek-AI 2024, "DeepSeek-V2" (arXiv 2405.04434) App. B and deepseek-ai/DeepSeek-V2-Lite config.json:
    # 27 layers, hidden 2048, 16 heads, MLA without a query bottleneck (kv_lora_rank 512, qk_nope 128, qk_rope
    # 64, v 128), layer 0 dense (10944), the rest 2 shared + 64 routed experts of 1408, top-6, vocab 102400;
    # 15.7B total, 2.4B active; sequence 4096.
    _moe("deepseek-v2-lite", 27, 2048, 16, 16, 10944, 102400, 4096, experts=64, experts_per_token=6,
         expert_ffn_hidden=1408, shared_experts=2, first_dense_layers=1, kv_lora_rank=512, qk_nope_head_dim=128,
         qk_rope_head_dim=64, v_head_dim=128),
    # Qwen Team 2024, "Qwen2.5 Technical Report" (arXiv 2412.15115) Table 1 and the released config.json files
    # (Qwen/Qwen2.5-0.5B … -72B): GQA, SwiGLU, RMSNorm, RoPE, heads of hidden / heads; embeddings tied up to 3B
    # (vocabulary 151,936), untied from 7B (152,064). Biases on the query, key and value projections alone, which
    # pipesim's all-or-nothing ``bias`` leaves out (129k parameters in the 7B). Pre-training sequence 4096 (§3.2,
    # before the 32,768-token stage). The model cards' counts: 0.49B, 1.54B, 3.09B, 7.61B, 14.7B, 32.5B, 72.7B.
    *(replace(_llama(name, layers, hidden, heads, kv_heads, ffn, vocab, 4096), tied_embeddings=vocab == 151936)
      for name, layers, hidden, heads, kv_heads, ffn, vocab in (
          ("qwen2.5-0.5b", 24, 896, 14, 2, 4864, 151936), ("qwen2.5-1.5b", 28, 1536, 12, 2, 8960, 151936),
          ("qwen2.5-3b", 36, 2048, 16, 2, 11008, 151936), ("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064),
          ("qwen2.5-14b", 48, 5120, 40, 8, 13824, 152064), ("qwen2.5-32b", 64, 5120, 40, 8, 27648, 152064),
          ("qwen2.5-72b", 80, 8192, 64, 8, 29568, 152064))),
    # Qwen Team 2025, "Qwen3 Technical Report" (arXiv 2505.09388) Tables 1–2 and the released config.json files
    # (Qwen/Qwen3-8B, -32B, -30B-A3B, -235B-A22B): heads of their own width (head_dim 128, where hidden / heads is
    # 128 only for the 8B), RMSNorm over each query and key head (QK-Norm, §2), GQA, SwiGLU, no biases, vocabulary
    # 151,936, embeddings untied from the 8B up; the MoE models route every layer's tokens to 8 of 128 experts
    # with no shared expert (moe_intermediate_size 768 and 1536). Pre-training sequence 4096 (§3.2, stages S1–S2;
    # S3 extends it to 32,768). Reported: 8.2B, 32.8B; 30.5B total 3.3B active, 235B total 22B active.
    replace(_llama("qwen3-8b", 36, 4096, 32, 8, 12288, 151936, 4096), qk_norm=True),
    replace(_llama("qwen3-32b", 64, 5120, 64, 8, 25600, 151936, 4096), attention_head_dim=128, qk_norm=True),
    _moe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 4096, experts=128, experts_per_token=8,
         expert_ffn_hidden=768, attention_head_dim=128, qk_norm=True),
    _moe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 4096, experts=128, experts_per_token=8,
         expert_ffn_hidden=1536, attention_head_dim=128, qk_norm=True),
    # Meta 2025, Llama 4 Scout (17B-16E) and Maverick (17B-128E), as NeMo builds them (nemo/collections/llm/gpt/
    # model/llama.py: Llama4Config, Llama4Experts16Config, Llama4Experts128Config; Llama3Config's 8 query groups):
    # 48 layers of 5120, 40 heads of 128, 8 KV heads, one shared expert of 8192 beside top-1 of 16 or 128 routed
    # experts of 8192 (a sigmoid router scaling the expert's input), Scout's every layer MoE and Maverick's every
    # other from layer 1 (moe_layer_freq [0, 1]·24) between dense layers of 16384, vocabulary 202,048 untied,
    # chunked attention (attention_chunk_size 8192) on three layers in four with every fourth a NoPE layer attending
    # to the whole sequence (nope_layer_interval 4), an L2 norm of queries and keys in Scout alone (qk_l2_norm,
    # counted as a QK-norm pass on every layer); sequence 8192 (Llama4Config.seq_length: the recipes'; Meta's own
    # pre-training sequence is not stated). Reported by Meta: 17B active of 109B (Scout) and 400B (Maverick), the
    # vision encoder and the input embedding counted.
    _moe("llama4-scout", 48, 5120, 40, 8, 16384, 202048, 8192, experts=16, experts_per_token=1,
         expert_ffn_hidden=8192, shared_experts=1, qk_norm=True, attention_chunk=8192, global_attention_every=4),
    _moe("llama4-maverick", 48, 5120, 40, 8, 16384, 202048, 8192, experts=128, experts_per_token=1,
         expert_ffn_hidden=8192, shared_experts=1, moe_layer_frequency=2, moe_layer_offset=1, attention_chunk=8192,
         global_attention_every=4),
    # OpenAI 2025, "gpt-oss-120b & gpt-oss-20b Model Card" (arXiv 2508.10925) Table 1 and the released config.json
    # files (openai/gpt-oss-120b, -20b): 36 and 24 layers of 2880, 64 heads of 64 (queries 4096 wide), 8 KV
    # heads, 128 and 32 experts of 2880 (a gated, clamped SwiGLU), top-4, no shared expert, biases on the
    # attention's and the experts' projections, windows of 128 keys on every other layer from layer 0
    # (layer_types), vocabulary 201,088 untied; pre-training sequence 4096 (initial_context_length, before YaRN
    # extends it). Reported: 116.83B and 20.91B parameters, 5.13B and 3.61B active. Its attention sinks (a
    # learned logit per head) are not counted.
    *(replace(_moe(name, layers, 2880, 64, 8, 2880, 201088, 4096, experts=experts, experts_per_token=4,
                   attention_head_dim=64, sliding_window=128, global_attention_every=2), bias=True)
      for name, layers, experts in (("gpt-oss-120b", 36, 128), ("gpt-oss-20b", 24, 32))),
]

MODEL_PRESETS: dict[str, ModelSpec] = {m.name: m for m in _PRESETS}
