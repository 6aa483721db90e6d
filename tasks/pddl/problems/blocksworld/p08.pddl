(define (problem blocksworld-p08)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 b4 b5 b6 - block
  )
  (:init
    (arm-empty)
    (clear b1)
    (clear b2)
    (clear b3)
    (clear b5)
    (clear b6)
    (on b2 b4)
    (on-table b1)
    (on-table b3)
    (on-table b4)
    (on-table b5)
    (on-table b6)
  )
  (:goal (and
    (on b4 b6)
    (on b5 b2)
    (on b6 b1)
  )))
