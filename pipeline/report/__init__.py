"""The run report: warehouse reads (data), sections, plots, a tiny document model (render) and build, which writes it all."""
