"""What a person sees in the Dagster UI, in headless Chromium against a real webserver."""
