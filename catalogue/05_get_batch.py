"""Catalogue for 05_get_batch: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name; ``breaks`` lists the grade cells that must lose points (and only those).
Graded with AUTOGRADER_ALLOW_CPU=1, so ``test_get_batch_gpu`` runs its CPU path.
"""

WRONG = [
    {
        "name": "start_range_misses_last",
        "misconception": "last window never drawn",
        "why": "draws starts from [0, len - context_length - 2]: the last window is never used",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    starts = torch.randint(0, len(dataset) - context_length - 1, (batch_size,))
    rows = np.stack([dataset[s : s + context_length + 1] for s in starts.tolist()]).astype(np.int64)
    tokens = torch.from_numpy(rows).to(device)
    return tokens[:, :-1], tokens[:, 1:]
'''},
        "breaks": ["test_get_batch_starts"],
    },
    {
        "name": "start_range_runs_past_end",
        "misconception": "window runs past the end",
        "why": "draws starts up to len - context_length, so the last window is one token short",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    starts = torch.randint(0, len(dataset) - context_length + 1, (batch_size,))
    rows = np.stack([dataset[s : s + context_length + 1] for s in starts.tolist()]).astype(np.int64)
    tokens = torch.from_numpy(rows).to(device)
    return tokens[:, :-1], tokens[:, 1:]
'''},
        "breaks": ["test_get_batch_starts"],
    },
    {
        "name": "y_not_shifted",
        "misconception": "targets not shifted by one",
        "why": "returns the same window as input and target",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,))
    x = np.stack([dataset[s : s + context_length] for s in starts.tolist()]).astype(np.int64)
    x = torch.from_numpy(x).to(device)
    return x, x.clone()
'''},
        "breaks": ["test_get_batch", "test_get_batch_starts", "test_get_batch_reads", "test_get_batch_gpu"],
    },
    {
        "name": "int32_tokens",
        "misconception": "int32 tokens",
        "why": "returns int32 tensors (embedding and cross_entropy want int64)",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,))
    rows = np.stack([dataset[s : s + context_length + 1] for s in starts.tolist()]).astype(np.int32)
    tokens = torch.from_numpy(rows).to(device)
    return tokens[:, :-1], tokens[:, 1:]
'''},
        "breaks": ["test_get_batch", "test_get_batch_reads", "test_get_batch_gpu"],
    },
    {
        "name": "numpy_rng",
        "misconception": "numpy's random generator, not torch's",
        "why": "draws starts with np.random, so torch.manual_seed does not reproduce a batch",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)
    rows = np.stack([dataset[s : s + context_length + 1] for s in starts]).astype(np.int64)
    tokens = torch.from_numpy(rows).to(device)
    return tokens[:, :-1], tokens[:, 1:]
'''},
        "breaks": ["test_get_batch_seed"],
    },
    {
        "name": "reads_whole_dataset",
        "misconception": "whole dataset read into memory",
        "why": "converts the whole dataset to an int64 tensor before slicing (40 GB of tokens -> 160 GB)",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    data = torch.from_numpy(np.asarray(dataset).astype(np.int64))
    starts = torch.randint(0, len(data) - context_length, (batch_size,))
    x = torch.stack([data[s : s + context_length] for s in starts])
    y = torch.stack([data[s + 1 : s + context_length + 1] for s in starts])
    return x.to(device), y.to(device)
'''},
        "breaks": ["test_get_batch_reads"],
    },
    {
        "name": "silent_cpu_fallback",
        "misconception": "silent fallback to the CPU",
        "why": "quietly uses the CPU when the requested CUDA device is not there",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    if not torch.cuda.is_available():
        device = "cpu"
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,))
    rows = np.stack([dataset[s : s + context_length + 1] for s in starts.tolist()]).astype(np.int64)
    tokens = torch.from_numpy(rows)
    if torch.device(device).type == "cuda":
        tokens = tokens.pin_memory().to(device, non_blocking=True)
    return tokens[:, :-1], tokens[:, 1:]
'''},
        "breaks": ["test_get_batch_device"],
    },
    {
        "name": "load_tokens_writable",
        "misconception": "token file opened writable",
        "why": "opens the memmap with mode 'r+', so a bug can overwrite the token file",
        "replace": {"load_tokens": '''
def load_tokens(path, dtype=np.uint16):
    return np.memmap(path, dtype=dtype, mode="r+")
'''},
        "breaks": ["test_load_tokens"],
    },
    {
        "name": "load_tokens_reads_file",
        "misconception": "token file read instead of mapped",
        "why": "np.fromfile reads the whole file into memory instead of mapping it",
        "replace": {"load_tokens": '''
def load_tokens(path, dtype=np.uint16):
    return np.fromfile(path, dtype=dtype)
'''},
        "breaks": ["test_load_tokens"],
    },
]

CORRECT = [
    {
        "name": "fancy_index_offsets",
        "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    ix = torch.randint(len(dataset) - context_length, (batch_size,))
    offsets = ix[:, None] + torch.arange(context_length + 1)       # (batch, context + 1)
    window = torch.from_numpy(np.asarray(dataset[offsets.numpy()]).astype(np.int64))
    x, y = window[:, :-1].contiguous(), window[:, 1:].contiguous()
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)
'''},
    },
    {
        "name": "nanogpt_style_two_stacks",
        "replace": {
            "get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    ix = torch.randint(len(dataset) - context_length, (batch_size,))
    x = torch.stack([torch.from_numpy(dataset[i : i + context_length].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(dataset[i + 1 : i + 1 + context_length].astype(np.int64)) for i in ix])
    if "cuda" in str(device):
        x = x.pin_memory().to(device, non_blocking=True)
        y = y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y
''',
            "load_tokens": '''
def load_tokens(path, dtype=np.uint16):
    itemsize = np.dtype(dtype).itemsize
    length = Path(path).stat().st_size // itemsize
    return np.memmap(str(path), dtype=dtype, mode="r", shape=(length,))
''',
        },
    },
]
