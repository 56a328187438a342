"""Entries of literal config dicts, and files that choose the CPU."""

import textwrap

import libcst as cst

from torchlint.analysis import Analysis
from torchlint.analysis.place_kinds import ACCEL, HOST

from helpers import lint_source


def analyse(src: str) -> Analysis:
    src = textwrap.dedent(src)
    return Analysis(cst.parse_module(src), "train.py", src)


def move_devices(a: Analysis):
    return [a.places.device_of(a.places.move_target(c), c.site) for c in a.facts.calls if c.method == "to"]


def test_an_entry_of_a_literal_config_names_its_device():
    a = analyse(
        """
        config = {"training": {"device": "cpu"}, "gpu": {"device": "cuda"}}
        def run(config):
            return config
        a = x.to(config["training"]["device"])
        b = x.to(config["gpu"]["device"])
        """
    )
    assert move_devices(a) == [HOST, ACCEL]


def test_a_config_written_into_or_built_conditionally_names_nothing():
    a = analyse(
        """
        config = {"device": "cpu"}
        config["device"] = pick()
        a = x.to(config["device"])
        other = {"device": "cpu"}
        other.update(overrides)
        b = x.to(other["device"])
        if fast:
            third = {"device": "cpu"}
        c = x.to(third["device"])
        loaded = yaml.safe_load(f)
        d = x.to(loaded["device"])
        """
    )
    assert move_devices(a) == [None, None, None, None]


def test_a_file_that_chooses_the_cpu_and_one_that_only_pulls_results_back():
    chooses = analyse(
        """
        import torch
        config = {"training": {"device": "cpu"}}
        model = Net().to(config["training"]["device"])
        """
    )
    pulls_back = analyse(
        """
        import torch
        def evaluate(model, loader):
            for x, y in loader:
                preds.append(model(x).to("cpu"))
        """
    )
    on_gpu = analyse(
        """
        import torch
        device = "cpu"
        if torch.cuda.is_available():
            device = "cuda"
        model = Net().to(device)
        """
    )
    assert [chooses.places.chooses_cpu(), pulls_back.places.chooses_cpu(), on_gpu.places.chooses_cpu()] == [
        True,
        False,
        False,
    ]


INFERENCE = """import torch
{choice}
model = torch.nn.Linear(4, 2).to(device)
model.load_state_dict(torch.load("model.pt"))
model.eval()
loader = torch.utils.data.DataLoader(data, batch_size=64, num_workers=4, pin_memory=True)
preds = []
for x, _ in loader:
    preds.append(model(x.to(device)).argmax(1))
"""


def test_speed_rules_are_silent_in_a_file_that_chooses_the_cpu():
    def codes(choice: str):
        return sorted({f.code for f in lint_source(INFERENCE.format(choice=choice), "predict.py")})

    assert "TL201" in codes('device = "cuda"')
    assert "TL201" not in codes('device = "cpu"')
    assert "TL201" not in codes('config = {"device": "cpu"}\ndevice = config["device"]')
