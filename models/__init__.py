"""fcircnn.models."""
