#!/usr/bin/env python3
"""house.py - the house rules that a reader can count: no function longer
than 60 lines (the body between a column-0 brace pair), and no control
statement more than four blocks deep.  Functions not yet split are named in
KNOWN with their length today; one that grows, or any new offender, fails.

    python3 tests/tools/house.py [SRC-DIR]
"""
import glob
import os
import re
import sys

LIMIT = 60
KNOWN = {}  # function: lines today; none is over the limit
CONTROL = re.compile(r'^( *)(if|for|while|switch|do|else)\b')


def functions(path):
    """(name, body lines, first line) of each function in path."""
    lines = open(path, encoding='utf-8').read().split('\n')
    i = 0
    while i < len(lines):
        if lines[i] == '{' and i > 0:
            j = i + 1
            while j < len(lines) and lines[j] != '}':
                j += 1
            k, name = i - 1, None
            while k >= 0 and name is None and i - k < 6:
                m = re.search(r'(\w+)\s*\(', lines[k])
                name = m.group(1) if m else None
                k -= 1
            yield name or '?', j - i - 1, i + 1
            i = j
        i += 1


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '../../src')
    bad, checked = [], 0
    for path in sorted(glob.glob(os.path.join(src, '**/*.c'), recursive=True)):
        for name, n, line in functions(path):
            checked += 1
            if n > LIMIT and n > KNOWN.get(name, 0):
                bad.append(f'{path}:{line}: {name} is {n} lines (at most {LIMIT})')
        for no, text in enumerate(open(path, encoding='utf-8'), 1):
            m = CONTROL.match(text)
            if m and len(m.group(1)) >= 4 + 4 * 4:
                bad.append(f'{path}:{no}: a block nested more than four deep')
    if checked < 100:
        bad.append(f'only {checked} functions found under {src}')
    for b in bad:
        print('FAIL:', b)
    print(f'# {checked} functions: {len(bad)} break the house rules')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
