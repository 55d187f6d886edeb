// placeholder: filled in by the ViewModels work
