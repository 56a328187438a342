"""Quick demo: fit y = 3x + 1 with a tiny network.

torchlint finds one mistake here: the script looks for a GPU but never
selects a device (TL100, a preview rule: `torchlint --preview`), so it runs on
the CPU even on a machine with a GPU.
"""
import torch
from torch import nn

print(f"CUDA available: {torch.cuda.is_available()}")

model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

x = torch.linspace(-1, 1, 256).unsqueeze(1)
y = 3 * x + 1

for step in range(500):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.4f}")
