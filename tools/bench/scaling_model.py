#!/usr/bin/env python3
"""The written model of docs/SCALING.md: bytes per step, all-reduce times and the points
where communication dominates, for the seed CNN and a small byte-level transformer. Every
figure is computed from the formulas below, none is measured; rerun to check the arithmetic:

    python3 tools/bench/scaling_model.py
"""

GB = 1e9
# Nominal line rates, one direction (bytes/s): the model's times are lower bounds.
LINKS = {"10 Gb/s Ethernet": 10e9 / 8, "100 Gb/s": 100e9 / 8,
         "PCIe 3.0 x16": 15.75 * GB, "PCIe 4.0 x16": 31.5 * GB}


def conv(k, cin, cout):
    return k * k * cin * cout + cout


def dense(i, o):
    return i * o + o


def seed_cnn():
    """models/seed_cnn.net: params and training FLOPs per image (3 x forward)."""
    params = conv(3, 1, 32) + conv(3, 32, 64) + conv(3, 64, 64) + dense(576, 64) + dense(64, 10)
    fwd = 2 * (26 * 26 * 32 * 9 * 1 + 11 * 11 * 64 * 9 * 32 + 3 * 3 * 64 * 9 * 64 + 576 * 64 + 64 * 10)
    return params, 3 * fwd


def transformer(vocab=256, ctx=128, d=256, layers=4, ff=1024):
    """Decoder-only, pre-norm, learned positions, untied head: params and training FLOPs per
    token (3 x forward; forward = 2 x matmul params + 2 x layers x ctx x d for the scores)."""
    per_layer = 2 * d + 3 * dense(d, d) + dense(d, d) + 2 * d + dense(d, ff) + dense(ff, d)
    embed = vocab * d + ctx * d
    params = embed + layers * per_layer + 2 * d + dense(d, vocab)
    fwd = 2 * (params - embed) + 2 * layers * ctx * d
    return params, 3 * fwd


def ring(n, nbytes, bw):
    """Ring all-reduce, bandwidth term: each rank sends and receives 2 (n-1)/n of the data."""
    return 2 * (n - 1) / n * nbytes / bw if n > 1 else 0.0


def host_sum(n, nbytes, bw):
    """clnet's in-process sum over n devices through the host: every replica's download (in
    parallel, one link each), replica 0's upload of the sum, then the parameters read from
    replica 0 and written to the n-1 others one after the other. The host's own pass over
    n x nbytes is left out (memory-bound, a few ms per GB)."""
    return (1 + 1 + 1 + (n - 1)) * nbytes / bw if n > 1 else 0.0


def ms(s):
    return f"{s * 1e3:.3g}" if s < 1 else f"{s * 1e3:.0f}"


def main():
    cnn_p, cnn_f = seed_cnn()
    tr_p, tr_f = transformer()
    models = [
        # name, params, global batch (rows), rows per epoch, FLOP per row, row unit
        ("seed CNN", cnn_p, 64, 60000, cnn_f, "image"),
        ("transformer (4 x 256, ctx 128)", tr_p, 32, 4404412 // 128, tr_f * 128, "sequence"),
    ]
    print("## Sizes (computed)\n")
    print("| model | parameters | gradient f32 | clnet MPI wire (f64) | training FLOP per row | global batch | steps per epoch |")
    print("|---|---|---|---|---|---|---|")
    for name, p, b, rows, f, unit in models:
        print(f"| {name} | {p:,} | {4 * p / 1e6:.3f} MB | {8 * (p + 1) / 1e6:.3f} MB | {f / 1e6:.1f} M per {unit} | "
              f"{b} | {-(-rows // b):,} |")

    print("\n## Communication per step (ms, bandwidth term only, computed)\n")
    print("| model | setup | link | bytes one after the other on a link | ms per step | comm s per epoch |")
    print("|---|---|---|---|---|---|")
    rows_out = []
    for name, p, b, rows, f, unit in models:
        steps = -(-rows // b)
        s32, s64 = 4 * p, 8 * (p + 1)
        setups = [  # (setup, link, n devices, seconds)
            ("8 devices, clnet host sum", "PCIe 3.0 x16", 8, host_sum(8, s32, LINKS["PCIe 3.0 x16"])),
            ("8 devices, clnet host sum", "PCIe 4.0 x16", 8, host_sum(8, s32, LINKS["PCIe 4.0 x16"])),
            ("8 devices, ring (for comparison)", "PCIe 3.0 x16", 8, ring(8, s32, LINKS["PCIe 3.0 x16"])),
            ("4 machines, clnet (f64 ring)", "10 Gb/s Ethernet", 4, ring(4, s64, LINKS["10 Gb/s Ethernet"])),
            ("4 machines, clnet (f64 ring)", "100 Gb/s", 4, ring(4, s64, LINKS["100 Gb/s"])),
            ("4 machines, f32 ring", "10 Gb/s Ethernet", 4, ring(4, s32, LINKS["10 Gb/s Ethernet"])),
            ("4 machines, f32 ring", "100 Gb/s", 4, ring(4, s32, LINKS["100 Gb/s"])),
        ]
        for net in ("10 Gb/s Ethernet", "100 Gb/s"):  # first the host sum in each machine, then the ranks
            t = host_sum(8, s32, LINKS["PCIe 3.0 x16"]) + ring(4, s64, LINKS[net])
            setups.append(("4 machines x 8 devices, clnet", f"PCIe 3.0 x16, then {net}", 32, t))
        for setup, link, n, t in setups:
            moved = f"{t * LINKS[link] / 1e6:.2f} MB" if link in LINKS else "both of the above"
            print(f"| {name} | {setup} | {link} | {moved} | {ms(t)} | {t * steps:.2f} |")
            rows_out.append((name, setup, link, t, n, b, f, unit))

    print("\n## Where communication dominates (computed)\n")
    print("Without overlap a step takes compute + communication; communication dominates once the")
    print("compute of a step is shorter than its communication, i.e. once each device is faster than:\n")
    print("| model | setup | link | rows per device per step | device faster than |")
    print("|---|---|---|---|---|")
    for name, setup, link, t, n, b, f, unit in rows_out:
        per = b / n
        rate = per / t
        extra = f", {rate * f / 1e12:.2f} TFLOP/s" if unit == "sequence" else f" ({rate * f / 1e9:.0f} GFLOP/s)"
        print(f"| {name} | {setup} | {link} | {per:g} | {rate:,.0f} {unit}s/s{extra} |")


if __name__ == "__main__":
    main()
