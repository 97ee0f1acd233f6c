"""What a killed run left behind, and how the next run puts it right.

`journal` is written before anything changes; `recovered` keeps the bytes an undo would
lose; `killed_run` reads both when a run opens and undoes only what the dead run did.
"""
