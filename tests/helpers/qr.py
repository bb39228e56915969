"""Reading a QR code back, module by module, for the page's tests (studio/ui/static/qr.js draws them): the
format bits (their BCH check, level M), the data under its mask, the blocks' Reed–Solomon check words, and the
byte-mode text. A clean reader of a clean picture: it checks the error correction words rather than using them,
so any wrong module fails the test."""

from __future__ import annotations

ECC_PER_BLOCK_M = [0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26]      # ISO/IEC 18004 table 9, level M
BLOCKS_M = [0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5]
MASKS = [lambda x, y: (x + y) % 2 == 0, lambda x, y: y % 2 == 0, lambda x, y: x % 3 == 0,
         lambda x, y: (x + y) % 3 == 0, lambda x, y: (x // 3 + y // 2) % 2 == 0,
         lambda x, y: (x * y) % 2 + (x * y) % 3 == 0, lambda x, y: ((x * y) % 2 + (x * y) % 3) % 2 == 0,
         lambda x, y: ((x + y) % 2 + (x * y) % 3) % 2 == 0]


def _bch(value: int, poly: int, bits: int) -> int:
    rem = value
    for _ in range(bits):
        rem = (rem << 1) ^ ((rem >> (bits - 1)) * poly)
    return rem


def _alignment(version: int, size: int) -> list[int]:
    if version == 1:
        return []
    n = version // 7 + 2
    step = -(-(version * 4 + 4) // (n * 2 - 2)) * 2
    return [6] + [size - 7 - step * k for k in range(n - 2, -1, -1)]


def _function_modules(version: int, size: int) -> set[tuple[int, int]]:
    fixed = {(6, i) for i in range(size)} | {(i, 6) for i in range(size)}
    for cx, cy in ((0, 0), (size - 8, 0), (0, size - 8)):           # finders, separators and format bits
        fixed |= {(x, y) for x in range(cx, cx + 8) for y in range(cy, cy + 8)}
    fixed |= {(8, y) for y in range(9)} | {(x, 8) for x in range(9)}
    fixed |= {(x, 8) for x in range(size - 8, size)} | {(8, y) for y in range(size - 8, size)}
    at = _alignment(version, size)
    for i, ax in enumerate(at):
        for j, ay in enumerate(at):
            if (i, j) not in ((0, 0), (0, len(at) - 1), (len(at) - 1, 0)):
                fixed |= {(ax + dx, ay + dy) for dx in range(-2, 3) for dy in range(-2, 3)}
    if version >= 7:
        fixed |= {(size - 11 + i % 3, i // 3) for i in range(18)} | {(i // 3, size - 11 + i % 3) for i in range(18)}
    return fixed


def _gf_mul(x: int, y: int) -> int:
    z = 0
    for i in range(7, -1, -1):
        z = ((z << 1) ^ ((z >> 7) * 0x11D)) & 0xFF
        z ^= ((y >> i) & 1) * x
    return z


def _rs_check_words(data: list[int], degree: int) -> list[int]:
    gen = [1]                                   # ∏ (x - α^i), highest power first
    root = 1
    for _ in range(degree):
        gen = [a ^ _gf_mul(b, root) for a, b in zip(gen + [0], [0] + gen)]
        root = _gf_mul(root, 2)
    rem = list(data) + [0] * degree
    for i in range(len(data)):
        factor = rem[i]
        if factor:
            for j, g in enumerate(gen):
                rem[i + j] ^= _gf_mul(g, factor)
    return rem[len(data):]


def read_qr(dark: list[list[bool]]) -> str:
    """The text of a QR code (rows of modules, True = dark, no quiet zone); AssertionError on anything wrong."""
    size = len(dark)
    version = (size - 17) // 4
    assert 1 <= version <= 10 and size == version * 4 + 17, f"{size} modules a side is no version 1-10 QR code"
    bit = lambda x, y: int(dark[y][x])                                              # noqa: E731
    fmt = [bit(8, i) for i in range(6)] + [bit(8, 7), bit(8, 8), bit(7, 8)] + [bit(14 - i, 8) for i in range(9, 15)]
    word = sum(b << i for i, b in enumerate(fmt)) ^ 0x5412
    data5 = word >> 10
    assert word == (data5 << 10 | _bch(data5, 0x537, 10)), "the format bits fail their BCH check"
    assert data5 >> 3 == 0, f"error correction level bits {data5 >> 3:02b}, not M's 00"
    mask = MASKS[data5 & 7]
    fixed = _function_modules(version, size)
    bits = []
    columns, right = [], size - 1                 # right-hand columns of the two-wide strips, skipping timing's 6
    while right >= 1:
        right = 5 if right == 6 else right
        columns.append(right)
        right -= 2
    for right in columns:
        for vert in range(size):
            for j in range(2):
                x = right - j
                y = size - 1 - vert if ((right + 1) & 2) == 0 else vert
                if (x, y) not in fixed:
                    bits.append(bit(x, y) ^ int(mask(x, y)))
    raw = len(bits) // 8
    words = [int("".join(map(str, bits[i * 8:i * 8 + 8])), 2) for i in range(raw)]
    blocks, ecc = BLOCKS_M[version], ECC_PER_BLOCK_M[version]
    short = blocks - raw % blocks
    lengths = [raw // blocks - ecc + (0 if b < short else 1) for b in range(blocks)]
    data = [[] for _ in range(blocks)]
    k = 0
    for i in range(max(lengths)):
        for b in range(blocks):
            if i < lengths[b]:
                data[b].append(words[k])
                k += 1
    checks = [[] for _ in range(blocks)]
    for _ in range(ecc):
        for b in range(blocks):
            checks[b].append(words[k])
            k += 1
    for b in range(blocks):
        assert checks[b] == _rs_check_words(data[b], ecc), f"block {b}'s Reed–Solomon words are wrong"
    stream = "".join(f"{w:08b}" for block in data for w in block)
    assert stream[:4] == "0100", f"mode {stream[:4]}, not byte mode"
    count_bits = 8 if version < 10 else 16
    count = int(stream[4:4 + count_bits], 2)
    body = stream[4 + count_bits:4 + count_bits + 8 * count]
    return bytes(int(body[i:i + 8], 2) for i in range(0, len(body), 8)).decode("utf-8")
