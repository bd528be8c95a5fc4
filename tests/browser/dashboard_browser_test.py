#!/usr/bin/env python3
"""The dashboard in a real browser (issue 37; docs/dashboard.md): a small elastic run of two members under
`loco coordinator`, then `loco dashboard` on the same run's directory; each page is loaded by headless
Chromium (chromium-headless-shell, installed by scripts/setup.sh), and the test reads the DOM the page's
script built: one table row per member with its step and loss, every chart drawn with points, the events.
A page that fails to render (no script, a script error, no data) fails the test.

    tests/browser/dashboard_browser_test.py LOCO_BINARY [--screenshots DIR]

--screenshots writes DIR/dashboard-coordinator.png and DIR/dashboard-files.png (docs/ keeps them).
Exit 77 (skipped) when no Chromium is installed outside CI; under CI=true a missing browser fails.
Every process it starts is stopped by its pid. Standard library only.
"""
import argparse
import hashlib
import hmac
import html.parser
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRET = "dashboard-browser-test-secret-0123456789"
RUN = "dash"
CHARTS = 5  # the charts dashboard.js draws
HOSTILE_NAME = "<img src=x onerror=document.title=1>"
HOSTILE_DETAIL = "<script>document.title='owned'</script>"
BROWSERS = ["chromium-headless-shell", "chromium", "chrome-headless-shell"]


class Page(html.parser.HTMLParser):
    """What the test checks of a dumped DOM: the member rows, the canvases' drawn points, the event rows."""

    def __init__(self):
        super().__init__()
        self.table = None  # the id of the table being read
        self.in_body = False
        self.rows = {"members": [], "events": []}
        self.cell = None
        self.points = []
        self.problem = None
        self.in_problem = False
        self.problem_hidden = True
        self.elements = {}  # tag -> count

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements[tag] = self.elements.get(tag, 0) + 1
        if tag == "table":
            self.table = attrs.get("id")
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body and self.table in self.rows:
            self.rows[self.table].append([])
        elif tag == "td" and self.in_body and self.table in self.rows:
            self.cell = ""
        elif tag == "canvas":
            self.points.append(int(attrs.get("data-points", "-1")))
        elif attrs.get("id") == "problem":
            self.in_problem = True
            self.problem_hidden = "hidden" in attrs

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_body = False
        elif tag == "td" and self.cell is not None:
            self.rows[self.table][-1].append(self.cell)
            self.cell = None
        elif tag == "p":
            self.in_problem = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data
        if self.in_problem and not self.problem_hidden:
            self.problem = (self.problem or "") + data


def find_browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def load(browser, url, screenshot=None):
    """The DOM of `url` after its script ran (5 s of virtual time: two polls), and a screenshot if asked."""
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
              "--virtual-time-budget=5000", "--window-size=1400,1500"]
    profile = tempfile.mkdtemp(prefix="loco-chromium-")
    try:
        flags = common + [f"--user-data-dir={profile}"]
        dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        if dom.returncode != 0:
            raise AssertionError(f"{browser} failed on {url}:\n{dom.stderr[-2000:]}")
        if screenshot:
            shot = subprocess.run(flags + [f"--screenshot={screenshot}", url], capture_output=True, text=True,
                                  timeout=120)
            assert shot.returncode == 0 and os.path.getsize(screenshot) > 10000, shot.stderr[-2000:]
        return dom.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def check_page(dom, expected_members, what):
    page = Page()
    page.feed(dom)
    assert page.problem is None, f"{what}: the page says it cannot update: {page.problem}"
    members = page.rows["members"]
    assert len(members) == expected_members, f"{what}: {len(members)} member rows, expected {expected_members}: {members}"
    for row in members:
        step, loss = row[2], row[3]
        assert step.isdigit() and int(step) > 0, f"{what}: a member row without a step: {row}"
        assert re.fullmatch(r"\d+\.\d{4}", loss), f"{what}: a member row without a loss: {row}"
    assert len(page.points) == CHARTS, f"{what}: {len(page.points)} charts, expected {CHARTS}"
    assert all(p > 0 for p in page.points), f"{what}: a chart drew no points: {page.points}"
    return page


class Process:
    """A process this test started, stopped by its pid however the test ends."""

    def __init__(self, args, env=None, log=None):
        self.log = open(log, "w") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE if log is None else self.log,
                                     stderr=subprocess.STDOUT, text=True)

    def first_line_matching(self, pattern, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"no line matching {pattern!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def prepare_data(loco, work):
    text = "".join(f"the jury said {i % 7} laws are old and the city is {i % 5}. " for i in range(300))
    os.makedirs(f"{work}/text")
    for d in range(6):
        with open(f"{work}/text/doc{d}.txt", "w") as f:
            f.write(text)
    subprocess.run([loco, "prepare", "--input", f"{work}/text", "--out", f"{work}/data", "--tokenizer", "byte",
                    "--val-fraction", "0.2"], check=True, capture_output=True, timeout=120)


def start_members(loco, work, port, steps):
    """Two members of an elastic DiLoCo run, started by hand as on two hosts."""
    env = dict(os.environ, LOCO_COORDINATOR=f"127.0.0.1:{port}", LOCO_RUN_ID=RUN, LOCO_RUN_SECRET=SECRET,
               OMP_NUM_THREADS="1")
    members = []
    for rank in range(2):
        args = [loco, "train", "--config", f"{ROOT}/configs/tiny.toml", "--set", f"data.dir={work}/data",
                "--set", f"train.out_dir={work}/run", "--set", f"train.steps={steps}", "--set", "train.log_every=5",
                "--set", "train.eval_every=50", "--set", "dist.elastic=true", "--set", "dist.algorithm=diloco",
                "--set", "dist.backend=gloo", "--set", "dist.batch=per_replica", "--set", "dist.replicas=2",
                "--set", "diloco.sync_every=10"]
        members.append(Process(args, env=dict(env, LOCO_MEMBER_NAME=f"rank-{rank}"), log=f"{work}/member{rank}.log"))
    return members


def get_json(port, path, token, timeout=5):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("GET", path, headers={"X-Loco-Token": token})
    answer = connection.getresponse()
    body = answer.read()
    connection.close()
    assert answer.status == 200, f"GET {path}: {answer.status} {body[:200]}"
    return json.loads(body)


def await_reports(port, token, members, points, timeout=120):
    """Waits until every member reported `points` metric points to the coordinator."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        series = get_json(port, "/history?after=0", token)["series"]
        if len(series) == members and all(len(s["step"]) >= points for s in series):
            return
        time.sleep(0.5)
    raise AssertionError(f"the members did not report {points} points within {timeout} s")


def await_exit(members, work):
    for rank, m in enumerate(members):
        code = m.proc.wait(timeout=300)
        assert code == 0, f"member {rank} exited {code}:\n" + open(f"{work}/member{rank}.log").read()[-3000:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("loco")
    parser.add_argument("--screenshots")
    args = parser.parse_args()
    browser = find_browser()
    if browser is None:
        message = "no headless Chromium (chromium-headless-shell): scripts/setup.sh installs it"
        if os.environ.get("CI"):
            sys.exit(f"dashboard_browser_test: {message}")
        print(f"dashboard_browser_test: skipped, {message}")
        sys.exit(77)
    loco = os.path.abspath(args.loco)
    shots = os.path.abspath(args.screenshots) if args.screenshots else None
    if shots:
        os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="loco-dashboard-")
    started = []
    try:
        prepare_data(loco, work)
        coordinator = Process([loco, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id", RUN,
                               "--min-replicas", "2", "--start-replicas", "2"],
                              env=dict(os.environ, LOCO_RUN_SECRET=SECRET))
        started.append(coordinator)
        port = int(coordinator.first_line_matching(r"on 127\.0\.0\.1:(\d+)")[1])
        token = hmac.new(SECRET.encode(), f"loco-status\n{RUN}".encode(), hashlib.sha256).hexdigest()
        members = start_members(loco, work, port, steps=300)
        started += members

        # While the run trains: both members in the table, training or waiting at a synchronisation.
        await_reports(port, token, members=2, points=8)
        url = f"http://127.0.0.1:{port}/?token={token}"
        page = check_page(load(browser, url, shots and f"{shots}/dashboard-coordinator.png"), 2, "coordinator")
        states = sorted(row[1] for row in page.rows["members"])
        assert set(states) <= {"training", "waiting"}, f"coordinator: live members shown as {states}"
        assert page.rows["events"], "coordinator: no events (joins, quorums, commits) on the page"
        print(f"coordinator page while training: members {states}, charts drew {page.points} points, "
              f"{len(page.rows['events'])} events")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/")  # served as text (it refreshes itself: no script to run)
        without_token = connection.getresponse().read().decode()
        assert "rank-0" not in without_token and "dashboard.js" not in without_token, \
            "the page without the token shows the members"

        # Once they finished: their rows stay, as members that left, with their last step.
        await_exit(members, work)
        page = check_page(load(browser, url), 2, "coordinator after the run")
        assert [row[1] for row in page.rows["members"]] == ["left", "left"], page.rows["members"]
        assert all(row[2] == "300" for row in page.rows["members"]), page.rows["members"]

        # A run directory named like markup, whose metrics line carries an event detail that is a script:
        # both must reach the page as text, never as elements.
        hostile = f"{work}/{HOSTILE_NAME}"
        os.makedirs(hostile)
        with open(f"{hostile}/metrics.jsonl", "w") as f:
            f.write(json.dumps({"step": 5, "loss": 3.0, "elapsed_s": 1.0,
                                "membership_events": [{"kind": "heal", "detail": HOSTILE_DETAIL}]}) + "\n")
        dashboard = Process([loco, "dashboard", f"{work}/run", hostile, "--port", "0"])
        started.append(dashboard)
        files_port = int(dashboard.first_line_matching(r"http://127\.0\.0\.1:(\d+)/")[1])
        dom = load(browser, f"http://127.0.0.1:{files_port}/", shots and f"{shots}/dashboard-files.png")
        page = check_page(dom, 3, "loco dashboard")
        assert page.elements.get("img", 0) == 0 and page.elements.get("script", 0) == 1, \
            f"loco dashboard: markup from a directory name or a metrics line became elements: {page.elements}"
        assert any(HOSTILE_NAME in row[0] for row in page.rows["members"]), page.rows["members"]
        assert any(HOSTILE_DETAIL in row[2] for row in page.rows["events"]), page.rows["events"]
        print(f"loco dashboard page: {len(page.rows['members'])} members, charts drew {page.points} points")
    finally:
        for p in started:
            p.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("dashboard_browser_test: passed")


if __name__ == "__main__":
    main()
