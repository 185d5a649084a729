#!/bin/sh
echo "harmony: coverage tools are not available in the offline build" >&2
exit 1
