"""Series styles for loco's gnuplot charts, so that a legend can be matched to its lines at a glance.

Every series of a panel gets its own colour *and* marker (Okabe-Ito's colour-blind-safe palette, one
filled or open marker each); a panel holds at most MAX_SERIES series, so charts with more split them
into panels. Imported by scripts/plot_runs.py and the reports in bench/ (standard library only).
"""

# (colour, gnuplot point type): no two share either.
STYLES = [
    ("#000000", 7),   # black, filled circle
    ("#E69F00", 5),   # orange, filled square
    ("#0072B2", 9),   # blue, filled triangle
    ("#009E73", 11),  # bluish green, filled inverted triangle
    ("#D55E00", 13),  # vermillion, filled diamond
    ("#56B4E9", 4),   # sky blue, open square
    ("#CC79A7", 6),   # reddish purple, open circle
    ("#8C6D1F", 2),   # dark yellow-brown, cross
]
MAX_SERIES = len(STYLES)


def style(index, points=True, size=0.7, width=1.5):
    """gnuplot style of the index-th series of a panel: 'lc rgb ... pt ... ps ... lw ...'."""
    if not 0 <= index < MAX_SERIES:
        raise ValueError(f"a panel holds at most {MAX_SERIES} series (asked for series {index + 1})")
    colour, point = STYLES[index]
    text = f"lc rgb '{colour}' lw {width}"
    return text + (f" pt {point} ps {size}" if points else "")


def chunks(items, size=MAX_SERIES):
    """items split in order into lists of at most `size`."""
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def quote(text):
    """A gnuplot single-quoted string."""
    return "'" + str(text).replace("'", "''") + "'"
