"""`torchlint run`'s observers on small scripts of our own: each mistake
reported at its line with the right count, and a clean script with nothing."""

import textwrap

from torchlint.runtime.observations import Clock, Status

from runtime_scripts import line_of, only, reported, run, script


def test_label_left_on_the_cpu(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in DataLoader(Items(), batch_size=8, num_workers=0, pin_memory=True):
            x = x.to(device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    )
    report = run(path)
    assert report.status is Status.OK and report.steps == 4 and report.clock is Clock.OPTIMIZER
    o = only(report, "TL103")
    assert (o.site.line, o.count, o.steps_seen, o.per_step, o.crash) == (
        line_of(path, "cross_entropy"),
        4,
        4,
        True,
        True,
    )
    assert "batch from a DataLoader" in o.message


def test_model_used_before_it_is_moved(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net()
        x = torch.randn(4, 10, device=device)
        print(model(x).shape)
        model.to(device)
        print(model(x).shape)
        """,
    )
    report = run(path)
    assert reported(report) == [("TL101", line_of(path, "print(model(x)"), 1)]
    o = report.findings[0]
    assert line_of(path, "model = Net()") in [s.line for s in o.related]  # where the model was made
    assert "`Linear` has its parameter `weight` on the CPU" in o.message


def test_cpu_tensor_kept_as_a_module_attribute(tmp_path):
    path = script(
        tmp_path,
        """
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 3)
                self.scale = torch.ones(3)

            def forward(self, x):
                return self.fc(x) * self.scale


        model = Scaled().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(2, 10, device=device)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    )
    report = run(path)
    o = only(report, "TL102")
    assert (o.site.line, o.count) == (line_of(path, "* self.scale"), 3)
    assert line_of(path, "self.scale = torch.ones(3)") in [s.line for s in o.related]
    assert "`Scaled.scale` is a plain tensor attribute" in o.message


def test_per_step_item(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seen = []
        for step in range(5):
            loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.append(loss.item())
        print(f"final {loss.item():.3f}")
        """,
    )
    report = run(path)
    o = only(report, "TL401")
    assert (o.site.line, o.count, o.steps_seen, o.steps, o.per_step) == (line_of(path, "seen.append"), 5, 5, 5, True)
    once = [x for x in report.observations if x.code == "TL401" and not x.reported]
    assert [(x.site.line, x.count) for x in once] == [(line_of(path, "final"), 1)]  # after the loop: once


def test_periodic_item_is_not_per_step(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(40):
            loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0:
                print(loss.item())
        """,
    )
    report = run(path)
    assert reported(report) == []
    (o,) = [x for x in report.observations if x.code == "TL401"]
    assert (o.count, o.steps_seen, o.per_step) == (4, 4, False)


def test_per_step_ones_to_device(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            mask = torch.ones(2, 3).to(device)
            loss = (model(torch.randn(2, 10, device=device)) * mask).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    )
    report = run(path)
    o = only(report, "TL104")
    assert (o.site.line, o.count, o.per_step) == (line_of(path, "torch.ones(2, 3)"), 4, True)
    assert reported(report) == [("TL104", o.site.line, 4)]


def test_eval_loop_without_no_grad(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        model.eval()
        data = TensorDataset(torch.randn(24, 10), torch.zeros(24, dtype=torch.long))
        correct = 0
        for x, y in DataLoader(data, batch_size=4, pin_memory=True):
            x, y = x.to(device), y.to(device)
            out = model(x)
            correct += (out.argmax(1) == y).sum()
        print(int(correct))
        with torch.no_grad():
            for x, y in DataLoader(data, batch_size=4, pin_memory=True):
                out = model(x.to(device))
        """,
    )
    report = run(path)
    o = only(report, "TL201")
    assert (o.site.line, o.count, o.steps_seen, o.per_step) == (line_of(path, "out = model(x)"), 6, 6, True)
    assert o.clock is Clock.BATCHES
    assert reported(report) == [("TL201", o.site.line, 6)]


def test_training_forward_is_not_missing_no_grad(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            out = model(torch.randn(2, 10, device=device))
            out.sum().backward()
            opt.step()
        """,
    )
    assert reported(run(path)) == []


def test_total_plus_loss_keeps_graphs(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        losses = []
        for step in range(4):
            loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss
            losses.append(loss)
        print(total.detach().item() / 4)
        """,
    )
    report = run(path)
    found = sorted((o.site.line, o.count) for o in report.findings if o.code == "TL202")
    # Seen at the ends of steps 3 and 4: the accumulators then hold the graphs of the steps before.
    assert found == [(line_of(path, "total += loss"), 2), (line_of(path, "losses.append"), 2)]
    assert {o.code for o in report.findings} == {"TL202"}


def test_detached_total_is_clean(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = torch.zeros((), device=device)
        for step in range(4):
            loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()
        print(float(total) / 4)
        """,
    )
    assert reported(run(path)) == []


def test_loader_with_no_workers(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(Items(), batch_size=8, pin_memory=True)
        for x, y in loader:
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    )
    report = run(path)
    o = only(report, "TL302")
    assert (o.site.line, o.count) == (line_of(path, "loader = DataLoader"), 4)
    assert dict(o.timings)["wait_s"] >= 0
    assert reported(report) == [("TL302", o.site.line, 4)]


def test_loader_rules(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        single = DataLoader(Items(), batch_size=1, num_workers=1, pin_memory=True, persistent_workers=True)
        for i, (x, y) in enumerate(single):
            if i == 3:
                break
        workers = DataLoader(Items(), batch_size=16, num_workers=2)
        for epoch in range(2):
            for x, y in workers:
                loss = F.cross_entropy(model(x.to(device)), y.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
        """,
    )
    report = run(path)
    single, workers = line_of(path, "single = DataLoader"), line_of(path, "workers = DataLoader")
    assert sorted(reported(report)) == [("TL301", single, 4), ("TL303", workers, 4), ("TL304", workers, 1)]


def test_clean_script_reports_nothing(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = TensorDataset(torch.randn(32, 10), torch.randint(0, 3, (32,)))
        loader = DataLoader(data, batch_size=8, shuffle=True, pin_memory=True)
        for epoch in range(2):
            model.train()
            total = torch.zeros((), device=device)
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.detach()
            print(f"epoch {epoch}: {total.item() / len(loader):.3f}")
        model.eval()
        with torch.inference_mode():
            print(model(torch.randn(2, 10, device=device)).argmax(1).tolist())
        torch.save(model.state_dict(), __file__ + ".pt")
        """,
    )
    report = run(path)
    assert report.status is Status.OK, report.error
    assert reported(report) == []
    assert report.device_used and report.steps == 8


NEVER_MOVED = """
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(2, 10)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """


def test_nothing_on_the_device_and_no_device_chosen(tmp_path):
    body = "import functools\nimport torch\nimport torch.nn as nn\nprint(torch.cuda.is_available())\nNet = functools.partial(nn.Linear, 10, 3)\n"
    path = script(tmp_path, body + textwrap.dedent(NEVER_MOVED), header=False)
    report = run(path)
    assert reported(report) == [("TL100", line_of(path, "model = Net()"), 1)]
    assert "nothing is ever sent to the GPU" in report.findings[0].message
    assert not report.device_used


def test_nothing_on_the_device_while_a_device_is_at_hand(tmp_path):
    # The header's `device = torch.device("cuda" if ...)` names the GPU: the model was not moved.
    path = script(tmp_path, NEVER_MOVED)
    report = run(path)
    assert reported(report) == [("TL101", line_of(path, "model = Net()"), 1)]
    assert "while `device` names the GPU" in report.findings[0].message
    assert not report.device_used


def test_a_device_string_at_hand_counts_and_a_cpu_device_does_not(tmp_path):
    body = "import functools\nimport torch\nimport torch.nn as nn\nNet = functools.partial(nn.Linear, 10, 3)\n"
    gpu = script(tmp_path, body + 'where = "cuda:0"\n' + textwrap.dedent(NEVER_MOVED), name="gpu.py", header=False)
    cpu = script(tmp_path, body + 'where = "cpu"\n' + textwrap.dedent(NEVER_MOVED), name="cpu.py", header=False)
    assert [o.code for o in run(gpu).findings] == ["TL101"]
    assert [o.code for o in run(cpu).findings] == ["TL100"]


def test_module_moved_every_step_and_per_step_device_calls(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        weights = torch.ones(3)
        for step in range(3):
            model.to(device)
            w = weights.to(device)
            loss = (model(torch.randn(2, 10, device=device)) * w).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        """,
    )
    report = run(path)
    assert sorted(reported(report)) == [
        ("TL106", line_of(path, "model.to(device)"), 2),
        ("TL106", line_of(path, "w = weights.to"), 2),  # made before the loop: not create-then-move
        ("TL403", line_of(path, "synchronize"), 3),
        ("TL403", line_of(path, "empty_cache"), 3),
    ]


def test_compile_again_data_parallel_and_legacy_profiler(tmp_path):
    path = script(
        tmp_path,
        """
        model = nn.DataParallel(Net().to(device))
        for step in range(2):
            fast = torch.compile(model)
            with torch.no_grad():
                fast(torch.randn(2, 10))
        with torch.autograd.profiler.profile(use_cuda=True) as prof:
            model(torch.randn(2, 10))
        """,
    )
    report = run(path)
    assert report.status is Status.OK, report.error
    assert sorted(reported(report)) == [
        ("TL404", line_of(path, "torch.compile"), 2),
        ("TL501", line_of(path, "profiler.profile"), 1),
        ("TL601", line_of(path, "nn.DataParallel"), 1),
    ]


def test_host_reads_of_each_kind(tmp_path):
    path = script(
        tmp_path,
        """
        x = torch.randn(3, device=device)
        model = Net().to(device)
        for step in range(2):
            model(torch.randn(1, 10, device=device))  # a step: one forward call
            a = x.sum().item()
            b = x.tolist()
            c = float(x[0])
            d = x.cpu()
            if x[0] > 10:
                pass
            print(x)
            e = f"{x[1]:.2f}"
            f = x.numpy()
        """,
    )
    report = run(path)
    reads = {(o.site.line, o.crash) for o in report.findings if o.code == "TL401"}
    needles = ("a = x", "b = x", "c = float", "d = x", "if x[0]", "print(x)", 'e = f"', "f = x")
    rows = [line_of(path, s) for s in needles]
    assert reads == {(r, r == rows[-1]) for r in rows}
    condition = [o for o in report.findings if o.site.line == rows[4]][0]
    assert "condition" in condition.message
    numpy = [o for o in report.findings if o.site.line == rows[-1]][0]
    assert "raises" in numpy.message


def test_evaluation_once_per_epoch_is_judged_on_its_own_batches(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = TensorDataset(torch.randn(32, 10), torch.randint(0, 3, (32,)))
        train = DataLoader(data, batch_size=8, pin_memory=True)
        val = DataLoader(data, batch_size=16, pin_memory=True)
        for epoch in range(3):
            for x, y in train:
                loss = F.cross_entropy(model(x.to(device)), y.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
            total = 0.0
            for x, y in val:
                out = model(x.to(device))
                total += F.cross_entropy(out, y.to(device)).item()
            print(f"epoch {epoch}: {total:.3f} {loss.item():.3f}")
        """,
    )
    report = run(path)
    assert report.steps == 12 and report.clock is Clock.OPTIMIZER
    assert sorted(reported(report)) == [
        ("TL201", line_of(path, "out = model(x"), 6),
        ("TL401", line_of(path, "total += F.cross_entropy"), 6),
    ]
    o = only(report, "TL201")
    assert (o.clock, o.steps_seen, o.steps, o.per_step) == (Clock.BATCHES, 6, 6, True)
    epochly = [x for x in report.observations if x.site.line == line_of(path, 'print(f"epoch')]
    assert [(x.code, x.count, x.reported) for x in epochly] == [("TL401", 3, False)]
