"""The graph formats, one module each: a detector, a loader and the files of a source
(:mod:`kgagents.tools.pgraph.loaders` gathers them)."""
