"""Catalogue for 02_einops: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name, after the notebook's imports cell (math, torch, beartype, einsum, rearrange,
Float, TypeCheckError, jaxtyped, Tensor); ``breaks`` lists the grade cells that must lose points.
"""

WRONG = [
    {
        "name": "heads_inner_factor",
        "misconception": "heads split as the inner factor",
        "why": "splits the last dimension as (d_head heads), so head h takes every heads-th feature",
        "replace": {"split_heads": '''
@jaxtyped(typechecker=beartype)
def split_heads(x: Float[Tensor, "batch seq model"], num_heads: int) -> Float[Tensor, "batch heads seq d_head"]:
    return rearrange(x, "b s (d h) -> b h s d", h=num_heads)
'''},
        "breaks": ["test_split_heads"],
    },
    {
        "name": "split_heads_reshape_without_transpose",
        "misconception": "reshape without the transpose",
        "why": "reshapes straight to (batch, heads, seq, d_head), mixing tokens into heads",
        "replace": {"split_heads": '''
@jaxtyped(typechecker=beartype)
def split_heads(x: Float[Tensor, "batch seq model"], num_heads: int) -> Float[Tensor, "batch heads seq d_head"]:
    batch, seq, model = x.shape
    return x.reshape(batch, num_heads, seq, model // num_heads)
'''},
        "breaks": ["test_split_heads"],
    },
    {
        "name": "merge_heads_inner_factor",
        "misconception": "heads merged as the inner factor",
        "why": "merges as (d_head heads), interleaving the heads' features",
        "replace": {"merge_heads": '''
@jaxtyped(typechecker=beartype)
def merge_heads(x: Float[Tensor, "batch heads seq d_head"]) -> Float[Tensor, "batch seq heads*d_head"]:
    return rearrange(x, "b h s d -> b s (d h)")
'''},
        "breaks": ["test_merge_heads"],
    },
    {
        "name": "missing_sqrt_d",
        "misconception": "1/sqrt(d) scaling forgotten",
        "why": "forgets the 1/sqrt(d) scaling",
        "replace": {"attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    return einsum(q, k, "... sq d, ... sk d -> ... sq sk")
'''},
        "breaks": ["test_attention_scores"],
    },
    {
        "name": "scaled_by_d_not_sqrt_d",
        "misconception": "scaled by 1/d instead of 1/sqrt(d)",
        "why": "divides by d instead of sqrt(d)",
        "replace": {"attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    return einsum(q, k, "... sq d, ... sk d -> ... sq sk") / q.shape[-1]
'''},
        "breaks": ["test_attention_scores"],
    },
    {
        "name": "scores_already_softmaxed",
        "misconception": "softmax applied to the scores",
        "why": "applies the softmax, which belongs to the next step",
        "replace": {"attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    scores = einsum(q, k, "... sq d, ... sk d -> ... sq sk") / math.sqrt(q.shape[-1])
    return scores.softmax(dim=-1)
'''},
        "breaks": ["test_attention_scores"],
    },
    {
        "name": "typecheck_decorator_removed",
        "misconception": "shape checks removed (@jaxtyped dropped)",
        "why": "drops @jaxtyped, so q and k with broadcastable but different leading dims are silently broadcast",
        "replace": {"attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
'''},
        "breaks": ["test_attention_scores"],
    },
    {
        "name": "attention_scores_without_leading_dims",
        "misconception": "einsum for 2-D inputs only",
        "why": "writes the einsum for 2-D q and k only, so batched (or batch-and-heads) inputs fail",
        "replace": {"attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    return einsum(q, k, "sq d, sk d -> sq sk") / math.sqrt(q.shape[-1])
'''},
        "breaks": ["test_attention_scores"],
    },
    {
        "name": "per_head_linear_only_2d",
        "misconception": "exactly one batch dimension assumed",
        "why": "hard-codes one batch dimension, so inputs with none or several leading dimensions fail",
        "replace": {"per_head_linear": '''
@jaxtyped(typechecker=beartype)
def per_head_linear(x: Float[Tensor, "*batch model_in"], w: Float[Tensor, "d_in d_out"], num_heads: int) -> Float[Tensor, "*batch model_out"]:
    per_head = rearrange(x, "b (h d) -> b h d", h=num_heads)
    out = einsum(per_head, w, "b h i, i o -> b h o")
    return rearrange(out, "b h o -> b (h o)")
'''},
        "breaks": ["test_per_head_linear"],
    },
    {
        "name": "per_head_linear_heads_inner",
        "misconception": "features split as (d_in heads)",
        "why": "splits the features as (d_in heads) before applying w",
        "replace": {"per_head_linear": '''
@jaxtyped(typechecker=beartype)
def per_head_linear(x: Float[Tensor, "*batch model_in"], w: Float[Tensor, "d_in d_out"], num_heads: int) -> Float[Tensor, "*batch model_out"]:
    per_head = rearrange(x, "... (d h) -> ... h d", h=num_heads)
    out = einsum(per_head, w, "... h i, i o -> ... h o")
    return rearrange(out, "... h o -> ... (h o)")
'''},
        "breaks": ["test_per_head_linear"],
    },
    {
        "name": "per_head_linear_outputs_interleaved",
        "misconception": "outputs merged as (d_out heads)",
        "why": "puts the outputs back as (d_out heads)",
        "replace": {"per_head_linear": '''
@jaxtyped(typechecker=beartype)
def per_head_linear(x: Float[Tensor, "*batch model_in"], w: Float[Tensor, "d_in d_out"], num_heads: int) -> Float[Tensor, "*batch model_out"]:
    per_head = rearrange(x, "... (h d) -> ... h d", h=num_heads)
    out = einsum(per_head, w, "... h i, i o -> ... h o")
    return rearrange(out, "... h o -> ... (o h)")
'''},
        "breaks": ["test_per_head_linear"],
    },
    {
        "name": "patch_channel_first",
        "misconception": "patch flattened channel first",
        "why": "flattens each patch in (c ph pw) order",
        "replace": {"patchify": '''
@jaxtyped(typechecker=beartype)
def patchify(images: Float[Tensor, "batch channels height width"], patch_size: int) -> Float[Tensor, "batch num_patches patch_dim"]:
    return rearrange(images, "b c (h ph) (w pw) -> b (h w) (c ph pw)", ph=patch_size, pw=patch_size)
'''},
        "breaks": ["test_patchify"],
    },
    {
        "name": "patch_grid_column_major",
        "misconception": "patches numbered column by column",
        "why": "numbers the patches column by column, (w h)",
        "replace": {"patchify": '''
@jaxtyped(typechecker=beartype)
def patchify(images: Float[Tensor, "batch channels height width"], patch_size: int) -> Float[Tensor, "batch num_patches patch_dim"]:
    return rearrange(images, "b c (h ph) (w pw) -> b (w h) (ph pw c)", ph=patch_size, pw=patch_size)
'''},
        "breaks": ["test_patchify"],
    },
]

CORRECT = [
    {
        "name": "plain_torch_views",
        "replace": {
            "split_heads": '''
@jaxtyped(typechecker=beartype)
def split_heads(x: Float[Tensor, "batch seq model"], num_heads: int) -> Float[Tensor, "batch heads seq d_head"]:
    batch, seq, model = x.shape
    return x.view(batch, seq, num_heads, model // num_heads).transpose(1, 2)
''',
            "merge_heads": '''
@jaxtyped(typechecker=beartype)
def merge_heads(x: Float[Tensor, "batch heads seq d_head"]) -> Float[Tensor, "batch seq heads*d_head"]:
    batch, heads, seq, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * d_head)
''',
            "attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    return torch.einsum("...qd,...kd->...qk", q * q.shape[-1] ** -0.5, k)
''',
            "per_head_linear": '''
@jaxtyped(typechecker=beartype)
def per_head_linear(x: Float[Tensor, "*batch model_in"], w: Float[Tensor, "d_in d_out"], num_heads: int) -> Float[Tensor, "*batch model_out"]:
    heads = x.unflatten(-1, (num_heads, w.shape[0]))
    return (heads @ w).flatten(-2)
''',
            "patchify": '''
@jaxtyped(typechecker=beartype)
def patchify(images: Float[Tensor, "batch channels height width"], patch_size: int) -> Float[Tensor, "batch num_patches patch_dim"]:
    b, c, height, width = images.shape
    grid = images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)  # b c h w ph pw
    return grid.permute(0, 2, 3, 4, 5, 1).reshape(b, -1, patch_size * patch_size * c)
''',
        },
    },
]
