(define (problem blocksworld-p05)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 b4 b5 - block
  )
  (:init
    (arm-empty)
    (clear b2)
    (clear b4)
    (clear b5)
    (on b1 b3)
    (on b2 b1)
    (on-table b3)
    (on-table b4)
    (on-table b5)
  )
  (:goal (and
    (on b4 b2)
    (on b5 b4)
  )))
