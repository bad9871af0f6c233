"""anonymizer: de-identify clinical notes using each patient's structured record."""

__version__ = "0.1.0"
