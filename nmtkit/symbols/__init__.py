"""Symbols kept through translation: placeholders, their patterns and checks, markup."""
