"""The review workbench's speed (`python bench/workbench.py`): `helmbench serve` starting on the
database of a 30-case run, and a page of 50 cases over 20,000 Results.

1. A 30-case run (`--helmbench-sample=30`) of the shipped benchmark by `oracle/borderline-unsafe`,
   judged by `oracle/judge` (no key, no network, a few seconds): the database `python3 dev.py bench`
   makes has the same shape. `helmbench serve --port 0` is started five times; each time is from the
   process start to the owner's link on its standard output and the first page answered.
2. The same database grown to 20,000 Results (the run's rows copied with SQL), then the browse page
   (50 cases) fetched through the running server: page 1, a page in the middle, the last page, a
   model and verdict filter, and a search over the replies; the median of 10 fetches each.

Targets (issue #27): start under 2 s; a page of 50 cases over 20,000 Results under 300 ms.
`--screenshots DIR` also saves the README's screenshots (browse, a rating page, the agreement page)
from headless Chromium. Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TARGET_START_S = 2.0
TARGET_PAGE_MS = 300.0


def env() -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "PYTEST_"))}
    found["PYTEST_ADDOPTS"] = "-p no:randomly"
    return found


def thirty_case_run(folder: Path, url: str) -> None:
    (folder / "pytest.ini").write_text("[pytest]\n")
    args = [
        str(BIN / "pytest"),
        str(REPO / "benchmark"),
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        f"helmbench_root={REPO / 'benchmark'}",
        "--helmbench-model=oracle/borderline-unsafe",
        "--helmbench-marking-model=oracle/judge",
        "--helmbench-user-model=oracle/user",
        "--helmbench-sample=30",
        f"--helmbench-db={url}",
    ]
    subprocess.run(args, cwd=folder, env=env(), capture_output=True, text=True, check=False, timeout=600)


def cpu_seconds(pid: int) -> float | None:
    """The process's CPU time so far (user + system; Linux's /proc): a figure a loaded machine
    inflates far less than the wall-clock one (2 cores shared by many sessions)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(url: str, folder: Path) -> tuple[subprocess.Popen, str, float]:
    """`helmbench serve --port 0`; the owner's link and the seconds to it and the first page."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [str(BIN / "helmbench"), "serve", "--db", url, "--port", "0"],
        cwd=folder,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    link = process.stdout.readline().strip() if process.stdout else ""
    httpx.get(link, timeout=30, follow_redirects=True).raise_for_status()  # the cookie set, then the runs
    return process, link, time.perf_counter() - began


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


def grow(url: str, target: int) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    columns = (
        "run_id, scenario_id, condition_id, user_context_id, perturbation_id, case_code, nodeid, status,"
        " reason,"
        " prompt, prompt_hash, raw_response, parsed_answer, expected, actual, evaluation_details, latency_ms,"
        " prompt_tokens, completion_tokens, cost_usd, judge_cost_usd, judge_prompt_tokens,"
        " judge_completion_tokens, finish_reason, attempts, cached, request_hash, created_at, layout,"
        " messages"
    )
    with engine.begin() as conn:
        while (count := conn.execute(text("select count(*) from result")).scalar_one()) < target:
            limit = min(count, target - count)
            conn.execute(
                text(
                    f"insert into result ({columns}, repeat_index) select {columns}, repeat_index + :k "
                    f"from result order by id limit {limit}"
                ),
                {"k": count},
            )
    engine.dispose()
    return count


def timed_pages(link: str, model: str) -> dict[str, float]:
    base = link.split("/?", 1)[0]
    client = httpx.Client(base_url=base, timeout=30)
    client.get(link)  # the cookie
    last = int(re.search(r"page 1 of (\d+)", client.get("/browse").text).group(1))
    pages = {
        "page 1": "/browse",
        "middle page": f"/browse?page={last // 2}",
        "last page": f"/browse?page={last}",
        "model + verdict filter": f"/browse?model={model}&verdict=failed&page=3",
        "search in replies": "/browse?q=crisis",
    }
    found = {}
    for name, path in pages.items():
        times = []
        for _ in range(10):
            began = time.perf_counter()
            answer = client.get(path)
            times.append((time.perf_counter() - began) * 1000)
            assert answer.status_code == 200 and "case(s)" in answer.text
        found[name] = statistics.median(times)
    client.close()
    return found


def screenshots(url: str, folder: Path, out: Path) -> None:
    """browse.png, rating.png, agreement.png of a small two-rater study, from headless Chromium."""
    from playwright.sync_api import sync_playwright

    def helmbench(*args: str) -> str:
        done = subprocess.run(
            [str(BIN / "helmbench"), *args, "--db", url],
            cwd=folder,
            env=env(),
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    study = helmbench(
        "review", "create", "--run-id", "1", "--size", "6", "--root", str(REPO / "benchmark")
    ).split()[1]
    links = [helmbench("review", "raters", "add", name, "--study", study) for name in ("Alice", "Bob")]
    process, owner, _ = start(url, folder)
    base = owner.split("/?", 1)[0]
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
            for n, link in enumerate(links):
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.goto(base + "/?" + link.split("/?", 1)[1])
                page.click("#start")
                if n == 0:
                    page.screenshot(path=str(out / "rating.png"), full_page=False)
                for item in range(6):
                    page.wait_for_load_state("load")
                    for row in range(page.locator("tr.check").count()):
                        page.locator("tr.check").nth(row).locator('input[value="yes"]').check()
                    verdict = "unsafe" if (n == 1 and item == 0) else "safe"
                    page.check(f'input[name="verdict"][value="{verdict}"]')
                    with page.expect_navigation():
                        page.click("#submit")
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(owner)
            page.goto(base + "/browse")
            page.screenshot(path=str(out / "browse.png"))
            page.goto(base + f"/study/{study}")
            page.locator("#agreement").scroll_into_view_if_needed()
            page.screenshot(path=str(out / "agreement.png"), full_page=True)
            browser.close()
    finally:
        stop(process)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=20_000)
    parser.add_argument("--screenshots", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helmbench-bench-workbench-") as name:
        folder = Path(name)
        url = f"sqlite:///{folder / 'helmbench.db'}"
        thirty_case_run(folder, url)
        if args.screenshots:
            screenshots(url, folder, args.screenshots)
        starts, cpus = [], []
        for _ in range(5):
            process, _, seconds = start(url, folder)
            cpus.append(cpu_seconds(process.pid))
            stop(process)
            starts.append(seconds)
        cpu = [c for c in cpus if c is not None]
        print(
            f"helmbench serve on a 30-case run: median {statistics.median(starts):.2f} s "
            f"(max {max(starts):.2f} s) to the owner's link and the first page; "
            f"target < {TARGET_START_S:.0f} s "
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            + (
                f"; the server's CPU time to that page: median {statistics.median(cpu):.2f} s)"
                if cpu
                else ")"
            )
        )
        grown = grow(url, args.results)
        process, link, _ = start(url, folder)
        try:
            found = timed_pages(link, "oracle/borderline-unsafe")
        finally:
            stop(process)
        for page, ms in found.items():
            print(
                f"browse, 50 cases of {grown:,} Results, {page}: median {ms:.0f} ms; "
                f"target < {TARGET_PAGE_MS:.0f} ms"
            )
        met = statistics.median(starts) < TARGET_START_S and max(found.values()) < TARGET_PAGE_MS
        print("targets met" if met else "a target was missed")
        return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
