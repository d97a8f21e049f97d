"""A procedurally generated video task whose classes differ only in motion.

No video data set can be downloaded where this project is tested, so accuracy is measured on
clips drawn here: one blob (random size, brightness and colour) over a random static
background texture, with pixel noise, moving along one of :data:`CLASSES` trajectories. Every
appearance parameter and the blob's mean position are drawn from the same distributions for
every class, so only the motion tells the classes apart (no single frame does). Clips are a
pure function of ``(seed, index)``, so a split is reproducible and two seeds give disjoint
splits.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CLASSES", "motion_accelerator_yaml", "motion_clips", "motion_network_yaml"]

#: The classes, by label: eight directions of straight motion (0 = +x, counter-clockwise in
#: steps of 45 degrees, y growing downwards), circles both ways, no motion, and a
#: back-and-forth oscillation along x.
CLASSES: tuple[str, ...] = (
    "right", "down-right", "down", "down-left", "left", "up-left", "up", "up-right",
    "circle-cw", "circle-ccw", "static", "oscillate-x",
)


def _trajectory(label: int, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Offsets ``[D, 2]`` (x, y) from the clip's centre for class ``label``; ``t`` is
    centred on 0."""
    if label < 8:
        theta = label * np.pi / 4
        speed = rng.uniform(0.8, 1.3)
        return speed * t[:, None] * np.array([np.cos(theta), np.sin(theta)])
    if label in (8, 9):
        radius = rng.uniform(2.0, 3.5)
        omega = (np.pi / 4) * (1 if label == 8 else -1)
        phase = rng.uniform(0, 2 * np.pi)
        angle = omega * t + phase
        return radius * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    if label == 10:
        return rng.normal(0, 0.15, (len(t), 2))
    amplitude = rng.uniform(2.0, 3.0)
    phase = rng.uniform(0, 2 * np.pi)
    return np.stack([amplitude * np.sin(np.pi / 2 * t + phase), np.zeros_like(t)], axis=1)


def _smooth_noise(rng: np.random.Generator, channels: int, h: int, w: int) -> np.ndarray:
    """A static background texture: white noise low-passed in the 2D frequency domain."""
    noise = rng.standard_normal((channels, h, w))
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    low = np.exp(-(fx**2 + fy**2) / (2 * 0.08**2))
    smooth = np.fft.irfft2(np.fft.rfft2(noise) * low, s=(h, w))
    return smooth / max(float(np.abs(smooth).max()), 1e-12)


def motion_clips(per_class: int, seed: int, *, depth: int = 8, height: int = 16,
                 width: int = 16, channels: int = 3, noise: float = 0.1
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Clips of every class, shuffled.

    Parameters
    ----------
    per_class : int
        Clips drawn per class.
    seed : int
        The split: the same seed gives the same clips; different seeds, independent ones.
    depth, height, width, channels : int
        Clip shape (frames, rows, columns, colour channels).
    noise : float
        Standard deviation of the per-pixel, per-frame Gaussian noise.

    Returns
    -------
    clips : ndarray, float32, ``[N, channels, depth, height, width]``
        Values of order 1 (background in ``[-0.3, 0.3]``, blob peak up to about 1.3).
    labels : ndarray, int64, ``[N]``
        Indices into :data:`CLASSES`; ``N = per_class * len(CLASSES)``.
    """
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1, not {per_class}")
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(CLASSES)), per_class)
    rng.shuffle(labels)
    t = np.arange(depth) - (depth - 1) / 2
    ys = np.arange(height)[:, None]
    xs = np.arange(width)[None, :]
    clips = np.empty((len(labels), channels, depth, height, width), dtype=np.float32)
    for i, label in enumerate(labels):
        centre = np.array([rng.uniform(0.35, 0.65) * (width - 1),
                           rng.uniform(0.35, 0.65) * (height - 1)])
        path = centre + _trajectory(int(label), t, rng)
        sigma = rng.uniform(1.2, 2.2)
        colour = rng.uniform(0.5, 1.0, channels) * rng.uniform(0.8, 1.3)
        background = 0.3 * _smooth_noise(rng, channels, height, width)
        d2 = ((xs[None] - path[:, 0, None, None]) ** 2
              + (ys[None] - path[:, 1, None, None]) ** 2)  # [D, H, W]
        blob = np.exp(-d2 / (2 * sigma**2))
        clip = (colour[:, None, None, None] * blob[None] + background[:, None]
                + noise * rng.standard_normal((channels, depth, height, width)))
        clips[i] = clip
    return clips, labels.astype(np.int64)


def motion_network_yaml(block_size: int, *, widths: tuple[int, int, int, int] = (16, 32, 64, 64),
                        depth: int = 8, height: int = 16, width: int = 16,
                        channels: int = 3) -> str:
    """A C3D-like network file for :func:`motion_clips`: three 3x3x3 convs with CBN, CReLU and
    CMaxPool ((1,2,2), then 2, then 2), an fc layer with CBN and CReLU, and the fc classifier
    of ``len(CLASSES)`` outputs, all at block size ``block_size``."""
    c1, c2, c3, f4 = widths
    return f"""\
name: motion_c3d
input: {{channels: {channels}, depth: {depth}, height: {height}, width: {width}}}
classes: {len(CLASSES)}
block_size: {block_size}
layers:
  - {{name: conv1, type: conv, out_channels: {c1}, kernel: 3, padding: 1, cbn: true,
     crelu: true, pool: {{window: [1, 2, 2]}}}}
  - {{name: conv2, type: conv, out_channels: {c2}, kernel: 3, padding: 1, cbn: true,
     crelu: true, pool: {{window: 2}}}}
  - {{name: conv3, type: conv, out_channels: {c3}, kernel: 3, padding: 1, cbn: true,
     crelu: true, pool: {{window: 2}}}}
  - {{name: fc4, type: fc, out_channels: {f4}, cbn: true, crelu: true}}
  - {{name: fc5, type: fc, out_channels: {len(CLASSES)}}}
"""


def motion_accelerator_yaml(block_size: int, network: str = "net.yaml") -> str:
    """An accelerator file for :func:`motion_network_yaml`'s network (the file ``network``,
    relative to the accelerator file): the project's small test accelerator, one core with
    ``Tn = 16``, ``Tm = 16`` (32 at ``block_size`` 16: whole DSP pairs of ``2B`` outputs),
    ``Td = 2``, ``Tr = Tc = 4`` and 3x3x3 kernels on the ZCU102, small enough that a clip runs
    through ``fcircnn run --on sim`` in seconds (about 81,000 cycles at ``block_size`` 8)."""
    tm = max(16, 2 * block_size)
    return f"""\
name: motion_acc
network: {network}
device:
  part: xczu9eg-ffvb1156-2-e
  resources: {{dsp: 2520, bram36: 912, lut: 274080, ff: 548160}}
clock_mhz: 200
block_size: {block_size}
address_width: 32
cores:
  - {{name: main, tn: 16, tm: {tm}, td: 2, tr: 4, tc: 4, unroll: [tn, tm],
     max_kernel: [3, 3, 3]}}
"""
