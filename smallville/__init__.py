"""smallville: a multi-agent town simulation engine in the style of Generative Agents."""

__version__ = "0.1.0"
