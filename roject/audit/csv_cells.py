"""Cells of the CSV files the app writes, made safe to open in a spreadsheet.

A cell that starts with = + - @, a tab or a carriage return is read by spreadsheets as a
formula (`=HYPERLINK(...)`, `=cmd|' /C calc'!A0`), and names people choose (projects,
conversation titles, file paths) reach the audit export. Such a cell gets a leading "'",
as OWASP's CSV injection guidance says, so it is shown as text.
"""

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """`value` as written to a CSV cell: a text starting like a formula quoted with "'";
    anything else (numbers, None) as it is."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(values) -> list:
    return [csv_cell(value) for value in values]
