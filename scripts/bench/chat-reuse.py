#!/usr/bin/env python3
"""A 10-turn `headroom chat` with and without the prefix cache: prompt tokens processed and time to
first token per turn, as a markdown table (bench/RESULTS.md quotes it).

Usage: scripts/bench/chat-reuse.py MODEL.gguf [extra headroom chat flags...]
Environment: HEADROOM (the binary, default build/apps/headroom/headroom).
"""
import os
import re
import subprocess
import sys

TURNS = [
    "Tell me a short story about a fox who lives near a river and loves to swim every morning.",
    "What did the fox find on the river bank one day, and why was it so surprised by it?",
    "Describe the fox's best friend, a small grey rabbit, and how the two of them first met.",
    "The rabbit is afraid of the water. How does the fox help the rabbit to feel brave?",
    "One evening a storm comes. Tell me what the two friends do to stay safe and warm.",
    "After the storm the river is full of branches. What do the animals build from them?",
    "A family of ducks asks to use what they built. What happens when they all meet?",
    "Winter arrives and the river freezes. How do the friends spend the long cold days?",
    "In spring the fox wants to travel far away. What does the rabbit say to the fox?",
    "Finish the story: tell me how the fox and the rabbit are still friends many years later.",
]

EVIDENCE = re.compile(
    r"prompt (\d+) tok(?: \((\d+) from the prefix cache\))? .*first token ([\d.]+) ms")


def run(model, extra, reuse):
    binary = os.environ.get("HEADROOM", "build/apps/headroom/headroom")
    args = [binary, "chat", "-m", model, "--temp", "0", "-n", "32"] + extra
    if not reuse:
        args.append("--no-prefix-cache")
    done = subprocess.run(args, input="\n".join(TURNS) + "\n", capture_output=True, text=True,
                          check=True)
    turns = [EVIDENCE.search(line) for line in done.stderr.splitlines()]
    turns = [(int(m[1]), int(m[2] or 0), float(m[3])) for m in turns if m]
    if len(turns) != len(TURNS):
        sys.exit(f"expected {len(TURNS)} evidence lines, got {len(turns)}:\n{done.stderr}")
    return turns


def main():
    model, extra = sys.argv[1], sys.argv[2:]
    without = run(model, extra, reuse=False)
    with_reuse = run(model, extra, reuse=True)
    print(f"### {os.path.basename(model)} {' '.join(extra)}\n")
    print("| turn | prompt tokens | prefilled without reuse | TTFT without (ms) "
          "| prefilled with reuse | TTFT with (ms) | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    totals = [0, 0, 0.0, 0.0]
    for i, ((p0, c0, t0), (p1, c1, t1)) in enumerate(zip(without, with_reuse), 1):
        print(f"| {i} | {p1} | {p0 - c0} | {t0:.1f} | {p1 - c1} | {t1:.1f} | {t0 / t1:.2f}× |")
        totals = [totals[0] + p0 - c0, totals[1] + p1 - c1, totals[2] + t0, totals[3] + t1]
    print(f"| all | | {totals[0]} | {totals[2]:.1f} | {totals[1]} | {totals[3]:.1f} "
          f"| {totals[2] / totals[3]:.2f}× |")


if __name__ == "__main__":
    main()
