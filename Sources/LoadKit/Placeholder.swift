// placeholder: filled in by the LoadKit work
