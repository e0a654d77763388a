"""opdesign: design and lint PyPTO attention operators for Ascend NPUs."""

__version__ = "0.1.0"
