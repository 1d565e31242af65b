"""Importing a suite of outside programs as applications (docs/appgate.md#import-a-suite): a generic
importer (appgate.suites.importer) and one small adapter per suite (appgate.suites.hecbench), with
the suite-independent pieces in appgate.suites.base and what is read from a program's source in
appgate.suites.sources. Nothing is imported here: sources and base are free of Django, the
importer is not."""
