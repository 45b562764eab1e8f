"""Files that survive crashes and cannot run code: atomic writes and checksummed state files."""
