"""Shared code of the integration suite: where things are (`paths`), starting and stopping
real peers (`processes`), the official conformance suite and its scenario lists
(`conformance`), and a Python SDK host in front of the relay (`host`)."""
