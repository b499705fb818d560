"""Graph passes. Importing this package registers every pass by name."""
