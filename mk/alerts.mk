# mk/alerts.mk: the alerting rules, included by the top Makefile (-include mk/*.mk).
#
#   make rules-test   `promtool check rules` on conf/alerts, `promtool test rules` on
#                     tests/data/alerts (Debian's promtool 2.42, which `make setup` unpacks into
#                     integration/.build/bin), and every alert held to a test where it fires and
#                     one where it stays quiet (integration/rules-test.py says what else)

.PHONY: rules-test

rules-test:
	python3 integration/rules-test.py
