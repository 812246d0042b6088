"""`make bench`: every experiment, for edgeflow and its peers in the same run; tables, CSV and plots
under results/, and results/SUMMARY.md.

usage: python -m testbed.bench [--quick] [--out DIR] [--switches a,b] [EXPERIMENT...]
"""

import argparse
import sys
import time
from pathlib import Path

from . import netns
from .experiments import EXPERIMENTS
from .experiments.common import RESULTS, machine, progress
from .switches import DEFAULT_SWITCHES
from .topology import teardown_on_exit


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiments", nargs="*", choices=[[], *EXPERIMENTS], default=[], metavar="EXPERIMENT",
                   help=f"any of {', '.join(EXPERIMENTS)} (default: all)")
    p.add_argument("--quick", action="store_true", help="a smoke-test version of each (seconds, not minutes)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--switches", help="the switches every experiment runs (default: each experiment's own "
                   f"BENCH_SWITCHES, else {','.join(DEFAULT_SWITCHES)})")
    a = p.parse_args(argv)
    names = a.experiments or list(EXPERIMENTS)
    chosen = tuple(a.switches.split(",")) if a.switches else None
    _lock = netns.exclusive("a benchmark")
    teardown_on_exit()
    netns.cleanup()
    a.out.mkdir(parents=True, exist_ok=True)
    sections = []
    start = time.monotonic()
    for name in names:
        progress(f"== {name} ==")
        switches = chosen or getattr(EXPERIMENTS[name], "BENCH_SWITCHES", DEFAULT_SWITCHES)
        tables = EXPERIMENTS[name].run(a.out, quick=a.quick, switches=switches)
        doc = EXPERIMENTS[name].__doc__.strip().replace("\n", " ")
        body = "\n".join(t.markdown() for t in tables)
        sections.append(f"## {name}\n\n{doc}\n\n![{name}]({name}.png)\n\n{body}")
    summary = (f"# edgeflow benchmark{' (quick)' if a.quick else ''}\n\n"
               f"Measured on {machine()}. Total time {time.monotonic() - start:.0f} s.\n"
               f"Switches: {', '.join(chosen or DEFAULT_SWITCHES)}"
               f"{'' if chosen else ', and more where an experiment says'}. Each table also has a CSV next to it."
               "\n\n" + "\n".join(sections))
    (a.out / "SUMMARY.md").write_text(summary)
    progress(f"wrote {a.out / 'SUMMARY.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
