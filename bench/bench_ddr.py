"""The DDR footprint of the shipped accelerators' images: feature maps each in their own
region against laid out by liveness (``compile --reuse-maps``).

Usage::

    python bench/bench_ddr.py [NAME ...] [--markdown | --readme]

Per accelerator (default: c3d_zcu102, r3d18_zcu102, spectral_c3d_zcu102): the bytes of the
feature maps each in its own region, by liveness, and the bound no layout can beat (the maps
live during the busiest descriptor, whole pages), and the whole image both ways. Plans only
(:func:`fcircnn.gen.plan.plan_network`): no weights, no calibration; a second or two each.
``--markdown`` prints the table of bench/README.md, ``--readme`` writes it there (block
``ddr``).
"""

from __future__ import annotations

import argparse

from readme import generated_by, markdown_table, replace_block

from fcircnn.gen.plan import ALIGN, plan_network
from fcircnn.models.config import builtin_path, load_accelerator

DEFAULT = ("c3d_zcu102", "r3d18_zcu102", "spectral_c3d_zcu102")


def footprint(name: str) -> dict[str, object]:
    """The figures of one built-in accelerator."""
    acc = load_accelerator(builtin_path(name))
    plain, reused = plan_network(acc), plan_network(acc, reuse_maps=True)
    maps = [r for r in reused.regions if r.live is not None]
    pages = {r.name: -(-max(r.size, 1) // ALIGN) * ALIGN for r in maps}
    live = [[r for r in maps if r.live[0] <= k <= r.live[1]]
            for k in range(len(reused.descriptors))]
    k = max(range(len(live)), key=lambda i: sum(pages[r.name] for r in live[i]))
    return {"name": name, "separate": plain.map_bytes_separate,
            "reused": reused.map_bytes_reused,
            "bound": sum(pages[r.name] for r in live[k]),
            "busiest": " and ".join(r.name for r in live[k]),
            "image_separate": plain.end - plain.base, "image_reused": reused.end - reused.base}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT))
    parser.add_argument("--markdown", action="store_true", help="print the Markdown table")
    parser.add_argument("--readme", action="store_true", help="write it into bench/README.md")
    args = parser.parse_args()
    rows = [footprint(name) for name in args.names]
    if args.markdown or args.readme:
        table = markdown_table(
            ["accelerator", "maps, each its own", "by liveness", "bound (busiest descriptor)",
             "image, each its own", "image, by liveness"],
            [[f"`{r['name']}`", f"{r['separate']:,}", f"{r['reused']:,}",
              f"{r['bound']:,} ({r['busiest']})", f"{r['image_separate']:,}",
              f"{r['image_reused']:,}"] for r in rows])
        text = f"{table}\n\n{generated_by(what='bytes, from the plans')}"
        print(text)
        if args.readme:
            replace_block("ddr", text)
        return
    for r in rows:
        print(f"{r['name']}: maps {r['separate']:,} -> {r['reused']:,} bytes "
              f"({100 * (1 - r['reused'] / r['separate']):.0f}% less; bound {r['bound']:,}: "
              f"{r['busiest']}); image {r['image_separate']:,} -> {r['image_reused']:,}")


if __name__ == "__main__":
    main()
