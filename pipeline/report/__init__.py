"""Report building blocks: plots (matplotlib, no display needed) and a tiny document model rendered to HTML and Markdown."""
