"""NonMaxSuppression: greedy per (batch, class) selection by descending score.

The greedy pass loops over *selected* boxes only: each selection computes its IoU with the
boxes still alive in one vectorised row and suppresses its overlaps at once, so memory is O(N)
(an N × N IoU matrix of an SSD's 27,000 boxes would take 5.8 GB).
"""

from __future__ import annotations

import numpy as np

from ...ir import DType
from ..registry import kernel


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[N, 4] boxes as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2."""
    boxes = boxes.astype(np.float64)
    if center_point_box:  # (x_center, y_center, width, height)
        xc, yc, w, h = boxes.T
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    y1, x1, y2, x2 = boxes.T
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=1)


def iou_row(corners: np.ndarray, area: np.ndarray, box: int, others: np.ndarray) -> np.ndarray:
    """IoU of box ``box`` with the boxes ``others`` (indices into ``corners``)."""
    top_left = np.maximum(corners[box, :2], corners[others, :2])
    bottom_right = np.minimum(corners[box, 2:], corners[others, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=-1)
    union = area[box] + area[others] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def _select(scores: np.ndarray, corners: np.ndarray, limit: int, iou_threshold: float,
            score_threshold: float | None) -> list[int]:
    order = np.argsort(-scores, kind="stable")  # ties: lower box index first
    if score_threshold is not None:
        order = order[scores[order] > score_threshold]
    area = (corners[:, 2] - corners[:, 0]) * (corners[:, 3] - corners[:, 1])
    chosen: list[int] = []
    while order.size and len(chosen) < limit:
        box = int(order[0])  # the best-scoring box not yet suppressed
        chosen.append(box)
        rest = order[1:]
        order = rest[iou_row(corners, area, box, rest) <= iou_threshold]
    return chosen


def _check_nms(node, *, center_point_box=0):
    return None if center_point_box in (0, 1) else f"center_point_box={center_point_box} is not 0 or 1"


def _scalar(value, default):
    return default if value is None or np.asarray(value).size == 0 else np.asarray(value).reshape(-1)[0]


@kernel("NonMaxSuppression", dtypes={DType.FLOAT32, DType.FLOAT64, DType.FLOAT16}, check=_check_nms)
def non_max_suppression(ctx, boxes, scores, max_per_class=None, iou_threshold=None, score_threshold=None, *,
                        center_point_box=0):
    limit = int(_scalar(max_per_class, 0))
    iou_limit = float(_scalar(iou_threshold, 0.0))
    score_limit = None if score_threshold is None else float(_scalar(score_threshold, 0.0))
    rows: list[tuple[int, int, int]] = []
    if limit > 0:
        for b in range(boxes.shape[0]):
            corners = _corners(boxes[b], center_point_box)
            for c in range(scores.shape[1]):
                picked = _select(scores[b, c].astype(np.float64), corners, limit, iou_limit, score_limit)
                rows.extend((b, c, i) for i in picked)
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
