// placeholder: filled in by the WireClient work
