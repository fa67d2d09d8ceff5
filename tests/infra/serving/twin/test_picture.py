"""The picture: well-formed SVG, one panel per model, every mark inside the canvas."""

from __future__ import annotations

import re
import xml.dom.minidom

from infra.serving.queueing import Lengths
from infra.serving.twin.engine import simulate
from infra.serving.twin.picture import svg
from infra.serving.twin.traces import Shape, generate
from tests.infra.serving.twin.twins import twin


def test_every_mark_is_inside_the_canvas():
    shape = Shape("burst", 3.0, 3600, Lengths(512, 1536), Lengths(256, 768), 4096, 1)
    outcomes = [simulate(twin(), generate(shape), 3600, 1), simulate(twin(model="n"), generate(shape), 3600, 1)]
    text = svg(outcomes, "two models")
    root = xml.dom.minidom.parseString(text).documentElement
    width, height = float(root.getAttribute("width")), float(root.getAttribute("height"))
    assert len(root.getElementsByTagName("polyline")) == 6
    xs = [float(v) for v in re.findall(r'\bx\d?="(-?[\d.]+)"', text)]
    ys = [float(v) for v in re.findall(r'\by\d?="(-?[\d.]+)"', text)]
    for line in root.getElementsByTagName("polyline"):
        for point in line.getAttribute("points").split():
            x, y = point.split(",")
            xs.append(float(x))
            ys.append(float(y))
    assert 0 <= min(xs) and max(xs) <= width
    assert 0 <= min(ys) and max(ys) <= height - 4  # room for a legend's descenders
