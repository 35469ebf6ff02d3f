#!/usr/bin/env python3
"""The reset link in a real browser: headless Chromium, driven by Selenium.

Starts an SMTP test server (scripts/smtp-test-server.py) and the daemon with
mail on, creates a user, asks for an email reset, takes the link from the
mail that arrived, and then, in Chromium: the form shows the account; a
mismatched pair shows the error; a good pair shows the success page; the new
password signs in; the same link again shows the expired page. Screenshots of
each page go to .build/artifacts/reset-page/ (not committed).

Usage: python3 scripts/browser-reset.py [BINARY]   (default .build/debug/countersign)
Needs: chromium and chromium-driver (Debian), selenium, aiosmtpd (PyPI).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from unused_port import unused_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMAIL = "ana@example.com"
OLD_PASSWORD = "correct horse"
NEW_PASSWORD = "staple orbit lantern"


def post_json(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def wait_for(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"browser-reset: timed out waiting for {what}")


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/countersign"))
    artifacts = os.path.join(ROOT, ".build/artifacts/reset-page")
    os.makedirs(artifacts, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="countersign-browser-")
    processes = []
    driver = None
    try:
        mail_dir = os.path.join(folder, "mail")
        password_file = os.path.join(folder, "smtp-password")
        with open(password_file, "w") as out:
            out.write("smtp-browser-test-pass\n")
        processes.append(subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "scripts/smtp-test-server.py"), "--dir", mail_dir,
             "--user", "countersign", "--password-file", password_file]))
        wait_for("the SMTP server", lambda: os.path.exists(os.path.join(mail_dir, "ready.json")))
        with open(os.path.join(mail_dir, "ready.json")) as source:
            smtp = json.load(source)

        database = os.path.join(folder, "countersign.sqlite")
        subprocess.run([binary, "user", "add", EMAIL, "--database", database, "--bcrypt-cost", "4"],
                       input=OLD_PASSWORD + "\n", text=True, check=True, stdout=subprocess.DEVNULL)
        port = unused_port()
        base = f"http://127.0.0.1:{port}"
        log = open(os.path.join(folder, "daemon.log"), "w")
        processes.append(subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{port}", "--database", database, "--bcrypt-cost", "4",
             "--public-url", base, "--smtp-url", f"smtp://127.0.0.1:{smtp['port']}", "--smtp-user", "countersign",
             "--smtp-password-file", password_file, "--smtp-from", "Countersign <noreply@countersign.test>",
             "--smtp-ca-file", smtp["ca"]], stdout=log, stderr=log))

        def healthy():
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=1) as response:
                    return response.status == 200
            except OSError:
                return False
        wait_for("the daemon", healthy)

        status, answer = post_json(base + "/api/mobile/auth/reset/email/initiate", {"email": EMAIL})
        assert status == 200, (status, answer)
        mail_file = wait_for("the mail", lambda: next(
            (os.path.join(mail_dir, name) for name in sorted(os.listdir(mail_dir)) if name.endswith(".json") and name != "ready.json"),
            None))
        with open(mail_file) as source:
            mail = json.load(source)
        link = next(word for word in mail["text"].split() if word.startswith(base + "/reset-password?token="))
        print(f"browser-reset: the mail arrived with a link to {base}/reset-password?token=…")

        options = Options()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=900,800"]:
            options.add_argument(argument)
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)

        def fill(password, confirm):
            old_form = driver.find_element(By.TAG_NAME, "form")
            driver.find_element(By.ID, "password").send_keys(password)
            driver.find_element(By.ID, "confirm").send_keys(confirm)
            driver.find_element(By.ID, "submit").click()

            # The next page has replaced this one. Chromium reports a node of a page
            # already gone either as stale or as "does not belong to the document".
            def replaced(_):
                try:
                    old_form.is_enabled()
                    return False
                except WebDriverException:
                    return True
            WebDriverWait(driver, 10).until(replaced)

        def expect_title(title):
            WebDriverWait(driver, 10).until(expected_conditions.title_is(title), f"expected the page {title!r}, got {driver.title!r}")

        driver.get(link)
        expect_title("Choose a new password")
        assert driver.find_element(By.ID, "account").text == "a***@example.com"
        driver.save_screenshot(os.path.join(artifacts, "1-form.png"))

        fill(NEW_PASSWORD, "something else entirely")
        expect_title("Choose a new password")
        problem = driver.find_element(By.ID, "problem").text
        assert problem == "The two passwords do not match.", problem
        driver.save_screenshot(os.path.join(artifacts, "2-mismatch.png"))

        fill(NEW_PASSWORD, NEW_PASSWORD)
        expect_title("Your password was changed")
        driver.save_screenshot(os.path.join(artifacts, "3-success.png"))

        status, answer = post_json(base + "/api/mobile/auth/login",
                                   {"email": EMAIL, "password": NEW_PASSWORD, "deviceName": "Laptop", "platform": "web"})
        assert status == 200, (status, answer)
        status, _ = post_json(base + "/api/mobile/auth/login",
                              {"email": EMAIL, "password": OLD_PASSWORD, "deviceName": "Laptop", "platform": "web"})
        assert status == 401, status

        driver.get(link)
        expect_title("This link has expired or was already used")
        driver.save_screenshot(os.path.join(artifacts, "4-expired.png"))
        print(f"browser-reset: form, mismatch, success and expired pages checked in Chromium; the new password signs in; "
              f"screenshots in {os.path.relpath(artifacts, ROOT)}/")
    finally:
        if driver is not None:
            driver.quit()
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
