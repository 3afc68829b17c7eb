"""Crawling: the one crawl runner and the context a command runs with."""
