"""Word alignments from attention (`nmtkit align`, `nmtkit translate --alignment`).

attention.py  teacher-forced cross-attention of a model, subword -> word attention
links.py      hard links, symmetrization, Pharaoh format, AER: pure functions
heatmap.py    heat-maps as images (matplotlib) and in the terminal (rich)
command.py    the align command: files in, links, heat-maps and scores out
"""
