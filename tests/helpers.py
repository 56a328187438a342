"""Shared snippets for the core tests."""
TL104_SRC = "import torch\ndevice = torch.device('cuda')\nx = torch.randn(3).to(device)\n"
TL104_FIXED = "import torch\ndevice = torch.device('cuda')\nx = torch.randn(3, device=device)\n"
# TL501 whose fix is unsafe (the result is used beyond key_averages/export_chrome_trace).
UNSAFE_SRC = "import torch\nwith torch.autograd.profiler.profile() as prof:\n    run()\nevents = prof.function_events\n"
CLEAN_SRC = "import torch\nx = torch.randn(3, device='cuda')\n"
BAD_SYNTAX = "def f(:\n    pass\n"
