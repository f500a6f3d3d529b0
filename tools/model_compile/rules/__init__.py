"""rules stage."""
